-- wrk script for scripts/bench_serve.sh: POSTs /v1/retrieve requests, cycling over the
-- queries of a file (one JSON string per line). Arguments: METHOD K QUERIES_FILE [TOKEN].
local queries = {}
local n = 0

function init(args)
  method = args[1] or "bm25"
  k = args[2] or "5"
  for line in io.lines(args[3]) do
    queries[#queries + 1] = line
  end
  headers = { ["Content-Type"] = "application/json" }
  if args[4] and args[4] ~= "" then
    headers["Authorization"] = "Bearer " .. args[4]
  end
end

function request()
  n = n % #queries + 1
  local body = '{"query": ' .. queries[n] .. ', "method": "' .. method .. '", "k": ' .. k .. '}'
  return wrk.format("POST", nil, headers, body)
end

-- One machine-readable line: requests/s, p50, p90, p99 and mean latency (ms), requests,
-- non-2xx responses, socket errors. (`done` runs in a Lua state of its own, without the
-- globals `init` set.)
function done(summary, latency, requests)
  local e = summary.errors
  io.write(string.format("RESULT %.1f %.2f %.2f %.2f %.2f %d %d %d\n",
    summary.requests / (summary.duration / 1e6), latency:percentile(50) / 1000, latency:percentile(90) / 1000,
    latency:percentile(99) / 1000, latency.mean / 1000, summary.requests, e.status,
    e.connect + e.read + e.write + e.timeout))
end
