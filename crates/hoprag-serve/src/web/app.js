// hoprag's web page: ask and compare methods, follow a method's hops, read an
// evaluation, look at the index. Plain script, no dependencies: graphs and plots are
// SVG drawn here. Every view is reproduced by its URL (view, q, methods, k, qid, m,
// entity, and the evaluation's run parameters).
'use strict';
(() => {
  const SVGNS = 'http://www.w3.org/2000/svg';
  const COLORS = ['#2f6fb3', '#e07b24', '#3a9a5b', '#c0392b', '#8e5fb8', '#8c6d3f', '#d15fa6', '#5f6b7a', '#a8a82b', '#2aa1b3'];
  // The baselines shown beside the server's default method until the user picks.
  const BASELINES = ['dense', 'hybrid'];
  const shownFirst = () => [...BASELINES, S.defaultMethod];
  const TOKEN_KEY = 'hoprag.token';
  const REPORT_KEY = 'hoprag.report';

  const $ = (sel, root = document) => root.querySelector(sel);
  const $$ = (sel, root = document) => Array.from(root.querySelectorAll(sel));

  // ---- DOM helpers: text always goes in as text, never as markup.
  function setAttrs(el, attrs) {
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v === null || v === undefined || v === false) continue;
      if (k === 'text') el.textContent = v;
      else if (k === 'data') Object.assign(el.dataset, v);
      else if (k.startsWith('on')) el.addEventListener(k.slice(2), v);
      else el.setAttribute(k, v === true ? '' : v);
    }
  }
  function append(el, kids) {
    for (const k of kids.flat(Infinity)) {
      if (k === null || k === undefined || k === false) continue;
      el.append(k instanceof Node ? k : String(k));
    }
  }
  function h(tag, attrs, ...kids) {
    const el = document.createElement(tag);
    setAttrs(el, attrs);
    append(el, kids);
    return el;
  }
  function s(tag, attrs, ...kids) {
    const el = document.createElementNS(SVGNS, tag);
    setAttrs(el, attrs);
    append(el, kids);
    return el;
  }
  const fmt = (x, d = 3) => (x === null || x === undefined || Number.isNaN(x) ? '–' : Number(x).toFixed(d));
  const pct = (x) => (x === null || x === undefined ? 'n/a' : (100 * x).toFixed(1));
  const ms = (micros) => (micros / 1000).toFixed(micros < 10000 ? 2 : 1);
  const cut = (t, n) => (t.length > n ? t.slice(0, n - 1) + '…' : t);
  const colorOf = (i) => COLORS[i % COLORS.length];

  // ---- State
  const S = {
    health: null,
    info: null,
    descriptions: new Map(),
    defaultMethod: '', // the server's, from /v1/methods
    dataset: null,
    question: null, // the data set question of the view, with its gold
    results: new Map(), // `${method}|${k}|${q}` -> response or {error}
    askKey: '',
    pinned: null,
    passages: new Map(), // index position -> {idx, id, title, text}
    report: null,
    loadedTrace: null,
    namespace: null, // the namespace every call works on (null: the default one)
  };

  // ---- Messages
  function message(text, kind) {
    const box = $('#message');
    box.hidden = !text;
    box.className = kind || '';
    box.textContent = text || '';
  }

  // ---- Token: asked for before the first call when the server wants one.
  function token() {
    return sessionStorage.getItem(TOKEN_KEY) || localStorage.getItem(TOKEN_KEY) || '';
  }
  let tokenPrompt = null;
  function askToken(error) {
    if (tokenPrompt) return tokenPrompt;
    tokenPrompt = new Promise((resolve) => {
      const dialog = $('#token-dialog');
      $('#token-error').hidden = !error;
      $('#token-error').textContent = error || '';
      $('#token').value = '';
      $('#token-form').onsubmit = (e) => {
        e.preventDefault();
        const t = $('#token').value.trim();
        if (!t) return;
        sessionStorage.removeItem(TOKEN_KEY);
        localStorage.removeItem(TOKEN_KEY);
        ($('#token-remember').checked ? localStorage : sessionStorage).setItem(TOKEN_KEY, t);
        dialog.close();
        tokenPrompt = null;
        resolve();
      };
      dialog.oncancel = (e) => e.preventDefault();
      dialog.showModal();
      $('#token').focus();
    });
    return tokenPrompt;
  }

  class ApiError extends Error {
    constructor(status, code, text) {
      super(text);
      this.status = status;
      this.code = code;
    }
  }

  async function api(path, body) {
    if (S.health && S.health.token_required && !token()) await askToken();
    // Every call names the page's namespace: the server answers only what the token opens.
    if (S.namespace) {
      if (body !== undefined) body = { ...body, namespace: S.namespace };
      else path += (path.includes('?') ? '&' : '?') + 'namespace=' + encodeURIComponent(S.namespace);
    }
    const headers = { Accept: 'application/json' };
    if (body !== undefined) headers['Content-Type'] = 'application/json';
    const t = token();
    if (t) headers.Authorization = 'Bearer ' + t;
    const init = { method: body === undefined ? 'GET' : 'POST', headers };
    if (body !== undefined) init.body = JSON.stringify(body);
    const r = await fetch(path, init);
    let data = null;
    try {
      data = await r.json();
    } catch (_) {
      data = null;
    }
    if (r.status === 401) {
      await askToken(t ? 'The server refused that token.' : null);
      return api(path, body);
    }
    if (!r.ok) {
      const err = (data && data.error) || {};
      throw new ApiError(r.status, err.code || 'http_' + r.status, err.message || r.statusText);
    }
    return data;
  }

  // Passages by index position (traces name them so), fetched once each.
  async function passagesAt(positions) {
    const missing = [...new Set(positions)].filter((i) => !S.passages.has(i));
    for (let i = 0; i < missing.length; i += 100) {
      const chunk = missing.slice(i, i + 100);
      const r = await api('/v1/passages?idx=' + chunk.join(','));
      for (const p of r.passages) S.passages.set(p.idx, p);
    }
    return positions.map((i) => S.passages.get(i));
  }
  async function passagesById(ids) {
    const out = new Map();
    const unique = [...new Set(ids)];
    for (let i = 0; i < unique.length; i += 100) {
      const r = await api('/v1/passages?ids=' + unique.slice(i, i + 100).map(encodeURIComponent).join(','));
      for (const p of r.passages) {
        out.set(p.id, p);
        S.passages.set(p.idx, p);
      }
    }
    return out;
  }

  // ---- URL: the state of every view.
  const params = () => new URLSearchParams(location.search);
  function setUrl(updates, push) {
    const p = params();
    for (const [k, v] of Object.entries(updates)) {
      if (v === null || v === undefined || v === '') p.delete(k);
      else p.set(k, v);
    }
    const url = '?' + p.toString();
    if (url === location.search) return;
    if (push) history.pushState(null, '', url);
    else history.replaceState(null, '', url);
  }
  function link(updates, text, attrs) {
    const p = params();
    for (const [k, v] of Object.entries(updates)) {
      if (v === null || v === undefined || v === '') p.delete(k);
      else p.set(k, v);
    }
    const a = h('a', Object.assign({ href: '?' + p.toString() }, attrs || {}), text);
    a.addEventListener('click', (e) => {
      if (e.ctrlKey || e.metaKey || e.shiftKey || e.button !== 0) return;
      e.preventDefault();
      history.pushState(null, '', a.getAttribute('href'));
      route();
    });
    return a;
  }

  const VIEWS = { ask: showAsk, hops: showHops, eval: showEval, index: showIndex };
  function route() {
    const p = params();
    const view = VIEWS[p.get('view')] ? p.get('view') : 'ask';
    for (const name of Object.keys(VIEWS)) $('#view-' + name).hidden = name !== view;
    for (const a of $$('#tabs a')) {
      if (a.dataset.view === view) a.setAttribute('aria-current', 'page');
      else a.removeAttribute('aria-current');
    }
    message('');
    delete document.body.dataset.ready;
    // `data-ready` tells a test (or a screenshot) that the view has drawn itself.
    VIEWS[view](p)
      .then(() => afterPaint(() => (document.body.dataset.ready = view)))
      .catch(showError);
  }
  function showError(e) {
    document.body.dataset.ready = 'error';
    message(e instanceof ApiError ? `${e.message} (${e.code})` : String(e.message || e));
  }

  // ---- Shared pieces
  function methodNames() {
    return S.info ? S.info.methods.map((m) => m.name) : [];
  }
  function available(name) {
    const m = S.info && S.info.methods.find((x) => x.name === name);
    return !m || m.available;
  }
  // What a method's trace holds, as the server's method registry says (`lists`, `walk`,
  // `beams`, `judge`, `router`, `choice`).
  function traceKind(name) {
    const m = S.info && S.info.methods.find((x) => x.name === name);
    return m && m.capabilities ? m.capabilities.trace : 'lists';
  }
  function totalMicros(trace) {
    return (trace && trace.steps ? trace.steps : []).reduce((a, st) => a + (st.micros || 0), 0);
  }
  // What a method's trace shows, by family (auto: the family of what it chose).
  function family(method, trace) {
    let name = method;
    const first = trace && trace.steps && trace.steps[0];
    if (first && traceKind(first.name) === 'choice' && first.detail) name = first.detail.method || name;
    return { walk: 'graph', judge: 'bridge', beams: 'gear', router: 'router' }[traceKind(name)] || 'lists';
  }
  function goldOf() {
    const gold = new Map();
    if (S.question) for (const g of S.question.gold) gold.set(g.id, g);
    return gold;
  }
  function goldBadge(g) {
    if (!g) return null;
    const text = g.last_hop ? 'gold · last hop' : g.hop ? `gold · hop ${g.hop}` : 'gold';
    return h('span', { class: 'badge', text });
  }

  async function loadQuestion(qid) {
    if (!qid) {
      S.question = null;
      return null;
    }
    if (S.question && S.question.id === qid) return S.question;
    S.question = await api('/v1/dataset/question?id=' + encodeURIComponent(qid));
    return S.question;
  }

  async function retrieve(q, method, k) {
    const key = `${method}|${k}|${q}`;
    if (!S.results.has(key)) {
      try {
        S.results.set(key, await api('/v1/retrieve', { query: q, method, k }));
      } catch (e) {
        if (!(e instanceof ApiError)) throw e;
        return { error: e };
      }
    }
    return S.results.get(key);
  }

  // ---- Ask & compare
  let askBuilt = false;
  function buildAskForm() {
    if (askBuilt) return;
    askBuilt = true;
    const box = $('#methods');
    for (const m of S.info.methods) {
      const input = h('input', { type: 'checkbox', name: 'method', value: m.name, disabled: !m.available });
      const title = m.available ? S.descriptions.get(m.name) || '' : m.reason;
      box.append(h('label', { class: m.available ? null : 'off', title }, input, m.name));
    }
    if (S.dataset) {
      $('#qid-row').hidden = false;
      const list = $('#questions');
      for (const q of S.dataset.questions) list.append(h('option', { value: q.id, label: cut(q.text, 90) }));
      $('#qid').addEventListener('change', () => pickQuestion($('#qid').value.trim()));
      $('#qid-prev').addEventListener('click', () => stepQuestion(-1));
      $('#qid-next').addEventListener('click', () => stepQuestion(1));
    }
    $('#ask-form').addEventListener('submit', (e) => {
      e.preventDefault();
      // A question typed by hand is no longer the data set's.
      const qid = S.question && S.question.text === $('#q').value.trim() ? S.question.id : null;
      setUrl({ view: 'ask', q: $('#q').value.trim(), k: $('#k').value, methods: selectedMethods().join(','), qid }, true);
      route();
    });
  }
  function selectedMethods() {
    return $$('#methods input:checked').map((i) => i.value);
  }
  function stepQuestion(d) {
    const qs = S.dataset.questions;
    const at = qs.findIndex((q) => S.question && q.id === S.question.id);
    const next = qs[(at + d + qs.length) % qs.length];
    if (next) pickQuestion(next.id);
  }
  function pickQuestion(qid) {
    const q = S.dataset && S.dataset.questions.find((x) => x.id === qid || x.text === qid);
    if (!q) {
      message(`No question "${qid}" in the data set.`);
      return;
    }
    setUrl({ view: 'ask', qid: q.id, q: q.text, k: $('#k').value, methods: selectedMethods().join(',') }, true);
    route();
  }

  async function showAsk(p) {
    buildAskForm();
    const wanted = (p.get('methods') || '').split(',').filter((m) => methodNames().includes(m));
    const methods = wanted.length ? wanted : shownFirst().filter(available);
    for (const input of $$('#methods input')) input.checked = methods.includes(input.value);
    const k = Math.max(1, Math.min(Number(p.get('k')) || (S.info && S.info.limits.default_k) || 5, 100));
    $('#k').value = k;
    const qid = p.get('qid');
    let q = p.get('q') || '';
    if (qid) {
      if (!S.dataset) throw new Error(`The question id ${qid} needs a data set on the server (hoprag serve --dataset FILE).`);
      const detail = await loadQuestion(qid);
      q = q || detail.text;
      $('#qid').value = qid;
    } else {
      S.question = null;
      $('#qid').value = '';
    }
    $('#q').value = q;
    if (!q) {
      $('#question-card').replaceChildren();
      $('#columns').replaceChildren(h('p', { class: 'muted', text: 'Ask a question to see what each method retrieves for it, side by side.' }));
      return;
    }
    const key = JSON.stringify([q, k, methods, qid]);
    if (key === S.askKey) return;
    S.askKey = key;
    await ask(q, methods, k, key);
  }

  function renderQuestionCard() {
    const card = $('#question-card');
    const q = S.question;
    if (!q) {
      card.replaceChildren();
      return;
    }
    const gold = h('ol', { class: 'gold-list' },
      q.gold.map((g) => h('li', { data: { pid: g.id } }, g.title, ' ', h('span', { class: 'muted small-text', text: g.id }), ' ', goldBadge(g))));
    const missing = q.gold_total - q.gold.length;
    card.replaceChildren(h('div', { class: 'panel question' },
      h('div', { class: 'grow' },
        h('div', null, h('strong', { text: q.id }), q.type ? h('span', { class: 'muted', text: ` · ${q.type}` }) : null),
        q.answers.length ? h('div', null, 'Answer: ', h('strong', { text: q.answers[0] })) : null),
      h('div', { class: 'grow' }, h('div', { class: 'muted', text: `Gold passages${q.hop_ordered ? ' (in hop order)' : ''}` }), gold,
        missing > 0 ? h('div', { class: 'error small-text', text: `${missing} gold passage(s) are not in the index` }) : null)));
  }

  async function ask(q, methods, k, key) {
    renderQuestionCard();
    S.pinned = null;
    const cols = $('#columns');
    if (!methods.length) {
      cols.replaceChildren(h('p', { class: 'muted', text: 'Choose at least one method.' }));
      return;
    }
    const shells = methods.map((m, i) => h('div', { class: 'col', data: { method: m } },
      h('div', { class: 'head' }, h('span', { class: 'pill', 'data-color': i }), h('span', { class: 'name', text: m })),
      h('div', { class: 'spinner', text: 'retrieving…' })));
    shells.forEach((el, i) => paintPill($('.pill', el), i));
    cols.replaceChildren(...shells);
    performance.clearMarks();
    performance.clearMeasures();
    performance.mark('hoprag:ask');
    let first = true;
    await Promise.all(methods.map(async (m, i) => {
      const r = await retrieve(q, m, k);
      if (S.askKey !== key) return;
      shells[i].replaceWith(column(m, i, r, k));
      if (first) {
        first = false;
        afterPaint(() => performance.measure('hoprag:first-result', 'hoprag:ask'));
      }
    }));
    if (S.askKey !== key) return;
    markUnique();
    afterPaint(() => performance.measure('hoprag:all-results', 'hoprag:ask'));
  }
  // After the browser has painted what was just added.
  function afterPaint(f) {
    requestAnimationFrame(() => setTimeout(f, 0));
  }
  function paintPill(el, i) {
    el.style.background = colorOf(i);
  }

  function column(m, i, r, k) {
    const head = h('div', { class: 'head' }, h('span', { class: 'pill' }), h('span', { class: 'name', text: m }));
    paintPill($('.pill', head), i);
    const col = h('div', { class: 'col', data: { method: m } }, head);
    if (r.error) {
      col.append(h('div', { class: 'error', text: `${r.error.message} (${r.error.code})` }));
      return col;
    }
    const gold = goldOf();
    const steps = r.trace.steps || [];
    const chosen = steps[0] && steps[0].name === m && steps[0].detail && steps[0].detail.method;
    head.append(h('span', { class: 'meta', text: `${ms(totalMicros(r.trace))} ms${chosen ? ' · ran ' + chosen : ''}` }));
    if (steps.some((st) => st.name === 'fallback')) head.append(h('span', { class: 'badge miss', text: 'fell back' }));
    head.append(link({ view: 'hops', m }, 'hops →', { class: 'small-text' }));
    if (S.question) {
      const found = r.passages.filter((p) => gold.has(p.id)).length;
      const total = S.question.gold_total;
      head.append(h('span', { class: 'recall', title: `gold passages in the top ${k}`, text: `R@${k} ${found}/${total}` }));
    }
    const list = h('ol');
    for (const p of r.passages) {
      const g = gold.get(p.id);
      const item = h('li', { class: 'hit' + (g ? ' gold' : ''), data: { pid: p.id } },
        h('div', { class: 'top' }, h('span', { class: 'rank', text: p.rank }), h('span', { class: 'title', text: p.title || p.id }),
          goldBadge(g), h('span', { class: 'score', text: fmt(p.score) })),
        h('div', { class: 'text', text: p.text }));
      item.addEventListener('mouseenter', () => highlight(p.id));
      item.addEventListener('mouseleave', () => highlight(S.pinned));
      item.addEventListener('click', () => {
        S.pinned = S.pinned === p.id ? null : p.id;
        item.classList.toggle('open');
        highlight(S.pinned);
      });
      list.append(item);
    }
    if (!r.passages.length) list.append(h('li', { class: 'hit muted', text: 'nothing retrieved' }));
    col.append(list);
    return col;
  }
  // The same passage in every column (and the question card) at once.
  function highlight(pid) {
    for (const el of $$('#view-ask [data-pid]')) {
      el.classList.toggle('hl', pid !== null && el.dataset.pid === pid);
      el.classList.toggle('pinned', S.pinned !== null && el.dataset.pid === S.pinned);
    }
  }
  function markUnique() {
    const cols = $$('#columns .col');
    if (cols.length < 2) return;
    const seen = new Map();
    for (const el of $$('#columns .hit[data-pid]')) seen.set(el.dataset.pid, (seen.get(el.dataset.pid) || 0) + 1);
    for (const el of $$('#columns .hit[data-pid]')) {
      if (seen.get(el.dataset.pid) === 1) $('.top', el).insertBefore(h('span', { class: 'badge ok', title: 'no other column has it', text: 'only here' }), $('.score', el));
    }
  }

  // ---- Follow the hops
  let hopsBuilt = false;
  function buildHops() {
    if (hopsBuilt) return;
    hopsBuilt = true;
    const select = $('#hops-method');
    for (const m of S.info.methods) select.append(h('option', { value: m.name, disabled: !m.available, text: m.name }));
    select.addEventListener('change', () => {
      S.loadedTrace = null;
      setUrl({ m: select.value }, true);
      route();
    });
    $('#trace-file').addEventListener('change', async (e) => {
      const file = e.target.files[0];
      if (!file) return;
      try {
        const r = JSON.parse(await file.text());
        if (!r.trace || !Array.isArray(r.trace.steps)) throw new Error('not a retrieval result: no trace.steps (hoprag query --json writes one)');
        S.loadedTrace = r;
        setUrl({ view: 'hops', m: r.method, q: r.query }, true);
        route();
      } catch (err) {
        message(`${file.name}: ${err.message}`);
      }
      e.target.value = '';
    });
  }

  async function showHops(p) {
    buildHops();
    if (p.get('qid') && S.dataset) await loadQuestion(p.get('qid'));
    else S.question = null;
    const q = p.get('q') || (S.question && S.question.text);
    const k = Number(p.get('k')) || 5;
    const chosen = (p.get('methods') || '').split(',').filter(Boolean);
    const walks = (x) => ['walk', 'choice'].includes(traceKind(x));
    const m = p.get('m') || chosen.find(walks) || chosen[0] || S.defaultMethod;
    $('#hops-method').value = m;
    const out = $('#hops');
    if (!q) {
      $('#hops-question').textContent = '';
      out.replaceChildren(h('p', { class: 'muted' }, 'Ask a question first (', link({ view: 'ask' }, 'Ask & compare'), '), or open a result JSON written by ', h('code', { text: 'hoprag query --json' }), '.'));
      return;
    }
    $('#hops-question').replaceChildren(h('strong', { text: q }));
    let r = S.loadedTrace && S.loadedTrace.method === m && S.loadedTrace.query === q ? S.loadedTrace : null;
    if (!r) {
      out.replaceChildren(h('p', { class: 'muted', text: 'retrieving…' }));
      r = await retrieve(q, m, k);
    }
    if (r.error) {
      out.replaceChildren(h('p', { class: 'error', text: `${m}: ${r.error.message} (${r.error.code})` }));
      return;
    }
    await renderHops(out, r, m, q);
  }

  async function renderHops(out, r, m, q) {
    const steps = r.trace.steps || [];
    const fam = family(m, r.trace);
    const fell = steps.find((st) => st.name === 'fallback');
    const top = h('div', { class: 'panel' },
      h('h2', null, `${m}: ${steps.length} steps, ${ms(totalMicros(r.trace))} ms`),
      fell ? h('p', { class: 'error', text: `Fell back to ${fell.detail.to}: ${fell.detail.reason}` }) : null,
      waterfall(steps));
    const body = h('div');
    out.replaceChildren(top, body, rawSteps(steps));
    const draw = { graph: drawGraphFamily, bridge: drawBridge, gear: drawGear, router: drawRouter, lists: drawLists }[fam];
    await draw(body, r, m, q);
  }

  // Step timings: one bar per step, laid end to end.
  function waterfall(steps) {
    const total = Math.max(1, steps.reduce((a, st) => a + st.micros, 0));
    const box = h('div', { class: 'waterfall' });
    let at = 0;
    for (const st of steps) {
      const llm = st.llm ? ` · ${llmCost(st.llm)}` : '';
      const bar = h('span', { class: 'bar' + (st.llm ? ' llm' : ''), title: `${st.name}: ${ms(st.micros)} ms${llm}` });
      bar.style.left = `${(100 * at) / total}%`;
      bar.style.width = `max(2px, ${(100 * st.micros) / total}%)`;
      box.append(h('span', { class: 'name', text: st.name }), h('span', { class: 'track' }, bar), h('span', { class: 'time', text: `${ms(st.micros)} ms${llm}` }));
      at += st.micros;
    }
    return box;
  }

  // A step's LLM calls: how many, their tokens (cached ones at their original cost).
  function llmCost(l) {
    const sum = (u) => (u ? (u.prompt_tokens || 0) + (u.completion_tokens || 0) : 0);
    const tokens = sum(l.tokens_spent) + sum(l.tokens_from_cache);
    const extra = [l.cache_hits ? `${l.cache_hits} cached` : '', l.errors ? `${l.errors} failed` : ''].filter(Boolean).join(', ');
    return `${l.calls} LLM call${l.calls === 1 ? '' : 's'}, ${tokens} tokens${extra ? ` (${extra})` : ''}`;
  }

  function rawSteps(steps) {
    return h('div', { class: 'panel steps' }, h('h3', { text: 'Steps, as the trace records them' }),
      steps.map((st) => h('details', null, h('summary', null, `${st.name} · ${ms(st.micros)} ms`),
        h('pre', { text: JSON.stringify(st.detail === undefined ? null : st.detail, null, 2) }))));
  }

  function passageRow(p, rank, extra) {
    const gold = goldOf().get(p.id);
    return h('tr', null, h('td', { class: 'num', text: rank }), h('td', null, h('span', { title: p.text || '', text: p.title || p.id }), ' ', goldBadge(gold)), extra || null);
  }

  // How the method ranked the passages, and whose masses the drawing shows.
  function walkSummary(walk) {
    const r = walk.ranking;
    if (!r) return walk.note || '';
    const iterated = `${walk.iterations} iterations, residual ${Number(walk.residual).toExponential(1)}`;
    const drawn = `mass on ${walk.reached.entities} entities and ${walk.reached.passages} passages, the heaviest ${walk.nodes.length - 1} drawn.`;
    if (r.walk === 'split') {
      const how = r.proven ? 'proven' : 'by its estimates, unproven';
      return `${walk.method} ranked by the split walk (${r.pushes} pushes, ${how}, each score within ${Number(r.bound).toExponential(1)}); the masses drawn are the full walk's from the same seeds (${iterated}); ${drawn}`;
    }
    return `${walk.method}'s full walk: ${iterated}${r.ranked ? ', stopped once the ranking was proven' : ''}; ${drawn}`;
  }

  // ppr, phasegraph, auto: the walk, drawn.
  async function drawGraphFamily(body, r, m, q) {
    const gold = goldOf();
    const include = [...new Set([...gold.keys(), ...r.passages.map((p) => p.id)])].slice(0, 20);
    const walk = await api('/v1/graph/walk', { query: q, method: m, include });
    const rank = new Map(r.passages.map((p) => [p.id, p.rank]));
    const layer = (n) => (n.kind === 'query' ? 0 : n.kind === 'passage' ? 3 : n.seed !== undefined ? 1 : 2);
    const maxMass = Math.max(1e-12, ...walk.nodes.map((n) => n.mass));
    const nodes = walk.nodes.map((n) => ({
      key: n.key,
      kind: n.kind,
      label: n.kind === 'query' ? 'question' : n.kind === 'passage' && rank.has(n.passage_id) ? `#${rank.get(n.passage_id)} ${n.label}` : n.label,
      title: n.kind === 'query' ? n.label : `${n.label}\nmass ${n.mass.toExponential(2)} (rank ${n.rank} of its kind)${n.seed !== undefined ? `\nseed weight ${fmt(n.seed)}` : ''}${n.passage_id ? `\n${n.passage_id}` : ''}`,
      layer: layer(n),
      r: n.kind === 'query' ? 10 : 4 + 12 * Math.sqrt(n.mass / maxMass),
      color: n.kind === 'query' ? '#1d2430' : n.kind === 'passage' ? 'var(--passage)' : n.seed !== undefined ? 'var(--seed)' : 'var(--entity)',
      cls: n.kind === 'passage' && gold.has(n.passage_id) ? 'gold' : '',
      shape: n.kind === 'passage' ? 'rect' : 'circle',
      onclick: n.kind === 'entity' ? () => { setUrl({ view: 'index', entity: n.label }, true); route(); } : null,
    }));
    // The facts are listed beside the graph; on the edges they would be unreadable.
    const edges = walk.edges.map((e) => ({ a: e.a, b: e.b, kind: e.kind, title: e.label ? `${e.kind}: ${e.label}` : e.kind }));
    const graph = graphView(nodes, edges, { layers: 4, headings: ['', 'linked entities', 'entities the walk reached', 'passages'] });
    const legend = h('div', { class: 'legend' },
      legendItem('circle', '#1d2430', 'question'), legendItem('circle', 'var(--seed)', 'linked entity (seed)'),
      legendItem('circle', 'var(--entity)', 'entity the walk reached'), legendItem('rect', 'var(--passage)', 'passage (#rank in the result)'),
      gold.size ? legendItem('ring', 'var(--gold)', 'gold passage') : null,
      h('span', { text: 'size: PPR mass · drag to pan, wheel to zoom, click an entity for its neighbourhood' }));
    const side = h('div', null,
      h('div', { class: 'panel' }, h('h3', { text: 'Linked entities (seeds)' }),
        walk.seeds.length ? h('table', null, h('tr', null, h('th', { text: 'entity' }), h('th', { text: 'via' }), h('th', { class: 'num', text: 'weight' })),
          walk.seeds.map((sd) => h('tr', null, h('td', { title: sd.evidence, text: sd.label }), h('td', { title: sd.evidence, text: `${sd.via}: ${cut(sd.evidence, 48)}` }), h('td', { class: 'num', text: fmt(sd.weight) }))))
          : h('p', { class: 'muted', text: 'No entity linked: the method answers with dense retrieval.' }),
        h('h3', { text: 'Facts nearest the question' }),
        walk.facts.length ? h('table', null, walk.facts.map((f) => h('tr', null, h('td', { text: f.text }), h('td', { class: 'num', text: fmt(f.score, 2) }))))
          : h('p', { class: 'muted', text: 'none' }),
        h('p', { class: 'muted small-text', text: walkSummary(walk) })),
      h('div', { class: 'panel' }, h('h3', { text: `Passages returned by ${m}` }),
        h('table', null, r.passages.map((p) => passageRow(p, p.rank, h('td', { class: 'num', text: fmt(p.score) }))))));
    body.replaceChildren(h('div', { class: 'hops-grid' }, h('div', { class: 'panel' }, graph, legend), side));
  }

  function legendItem(shape, color, text) {
    const svg = s('svg', { width: 14, height: 14 });
    if (shape === 'rect') svg.append(s('rect', { x: 2, y: 2, width: 10, height: 10, fill: color }));
    else if (shape === 'ring') svg.append(s('circle', { cx: 7, cy: 7, r: 5, fill: '#fff', stroke: color, 'stroke-width': 3 }));
    else svg.append(s('circle', { cx: 7, cy: 7, r: 6, fill: color }));
    fillOf(svg.firstChild, color);
    return h('span', null, svg, ' ', text);
  }
  // CSS variables are not valid in SVG fill attributes: they go through style.
  function fillOf(el, color) {
    if (color && color.startsWith('var(')) {
      if (el.getAttribute('fill') === '#fff') el.style.stroke = color;
      else el.style.fill = color;
    }
  }

  // A graph that pans (drag) and zooms (wheel), laid out without randomness so that a
  // URL always draws the same picture. With `layers`, nodes stand in columns (the
  // question, then what it links to, then what the walk reaches), ordered to cross
  // few edges; otherwise the first node is the centre and the rest stand around it.
  function graphView(nodes, edges, opts) {
    const W = 1000;
    const byKey = new Map(nodes.map((n) => [n.key, n]));
    const links = edges.filter((e) => byKey.has(e.a) && byKey.has(e.b));
    const H = opts.layers ? layered(nodes, links, byKey, W) : radial(nodes, W);

    const svg = s('svg', { class: 'graph', viewBox: `0 0 ${W} ${H}`, role: 'img', 'aria-label': 'graph' });
    const edgeLayer = s('g'), labelLayer = s('g'), nodeLayer = s('g');
    (opts.headings || []).forEach((text, l) => {
      const x = nodes.find((n) => n.layer === l);
      if (text && x) labelLayer.append(s('text', { class: 'heading', x: x.x - 6, y: 16, text }));
    });
    for (const e of links) {
      const a = byKey.get(e.a), b = byKey.get(e.b);
      // Edges within a column bend out of it, so that they do not run through its nodes.
      const same = opts.layers && a.layer === b.layer;
      const mx = (a.x + b.x) / 2 + (same ? 24 + Math.abs(a.y - b.y) * 0.25 : 0), my = (a.y + b.y) / 2;
      edgeLayer.append(s('path', { class: 'edge ' + e.kind, d: `M${a.x},${a.y} Q${mx},${my} ${b.x},${b.y}` }, s('title', { text: e.title || e.kind })));
      // Labels stand nearer the far end than the middle: around a centre, middles crowd.
      if (e.label) labelLayer.append(s('text', { class: 'edge-label', x: a.x + (b.x - a.x) * 0.62, y: a.y + (b.y - a.y) * 0.62 - 3, 'text-anchor': 'middle', text: cut(e.label, 28) }));
    }
    for (const n of nodes) {
      const g = s('g', { class: 'node ' + (n.cls || ''), transform: `translate(${n.x},${n.y})`, data: { key: n.key } });
      const shape = n.shape === 'rect'
        ? s('rect', { x: -n.r, y: -n.r * 0.75, width: 2 * n.r, height: 1.5 * n.r, rx: 2 })
        : s('circle', { r: n.r });
      shape.setAttribute('fill', '#888');
      shape.style.fill = n.color;
      const anchor = n.anchor || 'start';
      const dx = n.labelBelow ? 0 : anchor === 'end' ? -(n.r + 4) : n.r + 4;
      g.append(shape, s('title', { text: n.title || n.label }),
        s('text', { x: dx, y: n.labelBelow ? n.r + 14 : 4, 'text-anchor': n.labelBelow ? 'middle' : anchor, text: cut(n.label, n.labelMax || 32) }));
      if (n.onclick) g.addEventListener('click', n.onclick);
      g.addEventListener('mouseenter', () => g.classList.add('hl'));
      g.addEventListener('mouseleave', () => g.classList.remove('hl'));
      nodeLayer.append(g);
    }
    svg.append(edgeLayer, labelLayer, nodeLayer);
    panZoom(svg, W, H);
    return svg;
  }

  // Columns by `layer`; within a column, nodes ordered by the mean place of their
  // neighbours in the other columns (a few sweeps of the barycentre heuristic). Returns
  // the height.
  function layered(nodes, links, byKey, W) {
    const count = Math.max(...nodes.map((n) => n.layer)) + 1;
    const columns = Array.from({ length: count }, (_, l) => nodes.filter((n) => n.layer === l));
    const x = (l) => (l === 0 ? 40 : 150 + ((l - 1) * (W - 390)) / Math.max(1, count - 2));
    const near = new Map(nodes.map((n) => [n.key, []]));
    for (const e of links) {
      const a = byKey.get(e.a), b = byKey.get(e.b);
      if (a.layer === b.layer) continue;
      near.get(a.key).push(b);
      near.get(b.key).push(a);
    }
    const place = () => columns.forEach((col) => col.forEach((n, i) => { n.at = col.length > 1 ? i / (col.length - 1) : 0.5; }));
    place();
    for (let sweep = 0; sweep < 8; sweep++) {
      const order = sweep % 2 ? [...columns.keys()].reverse() : [...columns.keys()];
      for (const l of order) {
        if (l === 0) continue;
        const key = (n) => {
          const ns = near.get(n.key);
          return ns.length ? ns.reduce((a, m) => a + m.at, 0) / ns.length : n.at;
        };
        const keyed = columns[l].map((n, i) => [key(n), i, n]);
        keyed.sort((p, q) => p[0] - q[0] || p[1] - q[1]);
        columns[l] = keyed.map((k) => k[2]);
        place();
      }
    }
    const tallest = Math.max(...columns.map((c) => c.length));
    const top = 24;
    const H = Math.max(380, 24 * tallest + 40 + top);
    columns.forEach((col, l) => col.forEach((n, i) => {
      n.x = x(l);
      n.y = top + ((i + 1) * (H - top)) / (col.length + 1);
      n.labelMax = l === 0 ? 40 : 30;
      n.labelBelow = l === 0;
    }));
    return H;
  }

  // The first node in the middle, the others on one ring (two when many), labels
  // outwards. Returns the height.
  function radial(nodes, W) {
    const H = 600;
    const [centre, ...around] = nodes;
    Object.assign(centre, { x: W / 2, y: H / 2, labelBelow: true, labelMax: 40 });
    // An ellipse that leaves room for the labels on either side.
    const ry = H / 2 - 40, rx = W / 2 - 190;
    around.forEach((n, i) => {
      const a = -Math.PI / 2 + (2 * Math.PI * i) / around.length;
      const f = around.length > 16 && i % 2 ? 0.62 : 1;
      n.x = W / 2 + Math.cos(a) * rx * f;
      n.y = H / 2 + Math.sin(a) * ry * f;
      n.anchor = Math.cos(a) < -0.01 ? 'end' : 'start';
      n.labelMax = 26;
    });
    return H;
  }

  function panZoom(svg, W, H) {
    const vb = { x: 0, y: 0, w: W, h: H };
    const apply = () => svg.setAttribute('viewBox', `${vb.x} ${vb.y} ${vb.w} ${vb.h}`);
    svg.addEventListener('wheel', (e) => {
      e.preventDefault();
      const rect = svg.getBoundingClientRect();
      const f = Math.exp(Math.max(-0.5, Math.min(0.5, e.deltaY * 0.0015)));
      const px = vb.x + ((e.clientX - rect.left) / rect.width) * vb.w;
      const py = vb.y + ((e.clientY - rect.top) / rect.height) * vb.h;
      const w = Math.max(W / 12, Math.min(W * 4, vb.w * f));
      const scale = w / vb.w;
      vb.x = px - (px - vb.x) * scale;
      vb.y = py - (py - vb.y) * scale;
      vb.w = w;
      vb.h = vb.h * scale;
      apply();
    }, { passive: false });
    let drag = null;
    svg.addEventListener('pointerdown', (e) => {
      if (e.button !== 0) return;
      drag = { x: e.clientX, y: e.clientY, vx: vb.x, vy: vb.y, moved: false };
      svg.classList.add('dragging');
    });
    svg.addEventListener('pointermove', (e) => {
      if (!drag) return;
      const rect = svg.getBoundingClientRect();
      const dx = e.clientX - drag.x, dy = e.clientY - drag.y;
      if (Math.abs(dx) + Math.abs(dy) > 3 && !drag.moved) {
        drag.moved = true;
        svg.setPointerCapture(e.pointerId);
      }
      vb.x = drag.vx - (dx * vb.w) / rect.width;
      vb.y = drag.vy - (dy * vb.h) / rect.height;
      apply();
    });
    const end = () => {
      drag = null;
      svg.classList.remove('dragging');
    };
    svg.addEventListener('pointerup', end);
    svg.addEventListener('pointercancel', end);
    svg.addEventListener('dblclick', () => {
      Object.assign(vb, { x: 0, y: 0, w: W, h: H });
      apply();
    });
  }

  // bridge_rag and its ablations: the bridge, the hop-2 queries, the pool and its scores.
  async function drawBridge(body, r) {
    const record = (r.trace.steps.find((st) => st.name === 'decision record') || {}).detail;
    if (!record) return drawLists(body, r);
    const byId = await passagesById([record.bridge, ...record.pool.map((c) => c.id)]).catch(() => new Map());
    const title = (id) => (byId.get(id) ? byId.get(id).title || id : id);
    const ranked = new Map(record.ranking.map((id, i) => [id, i + 1]));
    const maxOf = (f) => Math.max(1e-9, ...record.pool.map((c) => Math.abs(f(c) || 0)));
    const svoMax = maxOf((c) => c.svo), judgeMax = maxOf((c) => c.judge), fMax = maxOf((c) => c.f);
    const bar = (v, max, cls) => h('span', null, h('span', { class: 'bar ' + cls, 'data-w': 0 }), fmt(v, 2));
    const pool = [...record.pool].sort((a, b) => b.f - a.f);
    const table = h('table', null,
      h('tr', null, h('th', { class: 'num', text: 'rank' }), h('th', { text: 'pool passage' }), h('th', { text: 'found by' }),
        h('th', { text: 'SVO similarity' }), h('th', { text: 'judge' }), h('th', { text: 'fused f' })),
      pool.map((c) => {
        const row = h('tr', null, h('td', { class: 'num', text: ranked.get(c.id) || '' }),
          h('td', null, title(c.id), ' ', goldBadge(goldOf().get(c.id))), h('td', { text: c.from.join(', ') }),
          h('td', null, bar(c.svo, svoMax, '')), h('td', null, c.judge === null || c.judge === undefined ? '–' : bar(c.judge, judgeMax, 'judge')),
          h('td', null, bar(c.f, fMax, 'f')));
        const bars = $$('.bar', row);
        const widths = [c.svo / svoMax, (c.judge || 0) / judgeMax, c.f / fMax];
        bars.forEach((b, i) => { b.style.width = Math.max(1, 70 * Math.max(0, widths[i])) + 'px'; });
        return row;
      }));
    body.replaceChildren(
      h('div', { class: 'panel' }, h('h3', { text: `The chain (condition ${String(record.condition).toUpperCase()})` }),
        h('div', { class: 'flow' },
          h('div', null, h('div', { class: 'muted', text: 'hop 1: the bridge' }), h('strong', { text: title(record.bridge) }), ' ', goldBadge(goldOf().get(record.bridge))),
          h('div', { class: 'arrow', text: '→' }),
          h('div', null, h('div', { class: 'muted', text: 'hop-2 queries (SVO)' }), h('ol', null, record.svo_queries.map((t) => h('li', { text: t })))),
          h('div', { class: 'arrow', text: '→' }),
          h('div', null, h('div', { class: 'muted', text: 'entities searched' }), h('div', { text: record.e1 || '–' }), h('div', { text: record.e2 || '–' })),
          h('div', { class: 'arrow', text: '→' }),
          h('div', null, h('div', { class: 'muted', text: 'pool' }), h('strong', { text: `${record.pool.length} passages` }), record.fell_back_to_dense ? h('div', { class: 'error', text: 'the judge scored too few: dense ranking used' }) : null)),
        record.warnings.length ? h('ul', { class: 'error small-text' }, record.warnings.map((w) => h('li', { text: w }))) : null),
      h('div', { class: 'panel' }, h('h3', { text: 'Pool, by fused score' }), table));
  }

  // GEAR, SyncGE, NaiveGE: the agent's steps, each round's triples and beams.
  async function drawGear(body, r) {
    const out = h('div', { class: 'panel' }, h('h3', { text: 'The agent, step by step' }));
    let block = out;
    const facts = (list) => h('div', { class: 'chain' }, (list || []).map((f) => h('span', { class: 'triple', text: typeof f === 'string' ? f : `${f.subject} · ${f.predicate} · ${f.object}` })));
    let base = null;
    for (const st of r.trace.steps) {
      const d = st.detail || {};
      if (st.name === 'iteration') {
        block = h('div', { class: 'agent-step' }, h('strong', { text: `Step ${d.step}: ` }), h('span', { text: d.query }));
        out.append(block);
        base = null;
      } else if (st.name.startsWith('base ')) {
        if (!base) {
          base = h('div', { class: 'muted small-text' });
          block.append(base);
        }
        base.textContent = `${base.textContent ? base.textContent + ', ' : 'base retrieval: '}${st.name.slice(5)} ${ms(st.micros)} ms`;
      } else if (st.name === 'read' || st.name === 'gist read') {
        block.append(h('div', null, h('span', { class: 'muted', text: `${st.name} (${d.passages || 0} passages): ` }), d.error ? h('span', { class: 'error', text: d.error }) : null), facts(d.proximal_triples));
      } else if (st.name === 'triple link') {
        block.append(h('div', { class: 'muted', text: `linked to the index's triples (${d.unlinked || 0} not linked):` }),
          h('div', { class: 'chain' }, (d.links || []).map((l) => h('span', { class: 'triple', title: l.fact, text: l.triple ? `${l.triple[1]} (${fmt(l.triple[2], 2)})` : `✗ ${l.fact}` }))));
      } else if (st.name === 'initial triples') {
        block.append(h('div', { class: 'muted', text: `${d.triples} triples of the ${d.passages} base passages start the beams` }));
      } else if (st.name === 'beam search') {
        block.append(h('div', { class: 'muted', text: `beams (${(d.beams || []).length} shown, ${(d.passages || []).length} passages reached):` }));
        for (const b of d.beams || []) {
          const chain = h('div', { class: 'chain' }, h('span', { class: 'muted small-text', text: fmt(b.score, 2) }));
          b.triples.forEach((t, i) => {
            if (i) chain.append(h('span', { class: 'arrow', text: '→' }));
            chain.append(h('span', { class: 'triple', text: t }));
          });
          block.append(chain);
        }
      } else if (st.name === 'reason') {
        const v = d.verdict || {};
        block.append(h('div', null, h('span', { class: v.answerable ? 'badge ok' : 'badge miss', text: v.answerable ? 'answerable' : 'not yet' }), ' ', v.answer ? h('strong', { text: v.answer + ' ' }) : null, h('span', { class: 'muted', text: v.reason || d.error || '' })));
      } else if (st.name === 'rewrite') {
        block.append(h('div', null, h('span', { class: 'muted', text: 'next query: ' }), d.next_query || h('span', { class: 'error', text: d.error || 'none' })));
      } else if (st.name === 'passage link' || st.name === 'fuse all' || st.name === 'fuse') {
        out.append(h('div', { class: 'agent-step' }, h('strong', { text: st.name }), ' ',
          h('span', { class: 'muted', text: st.name === 'fuse all' ? `stopped: ${d.stopped || 'max steps'}, ${d.rounds} rounds, ${d.linked_lists} linked lists` : st.name === 'fuse' ? `RRF k=${d.rrf_k} of ${d.graph} beam passages and ${d.base} base passages` : `${(d || []).length} memory triples linked to passages` })));
      }
    }
    const list = h('div', { class: 'panel' }, h('h3', { text: 'Passages returned' }),
      h('table', null, r.passages.map((p) => passageRow(p, p.rank, h('td', { class: 'num', text: fmt(p.score) })))));
    body.replaceChildren(h('div', { class: 'hops-grid' }, out, list));
  }

  // RegimeRouter: the bridge sentence, the features and the decision.
  async function drawRouter(body, r) {
    const route = (r.trace.steps.find((st) => st.name === 'route') || {}).detail;
    const rank = (r.trace.steps.find((st) => st.name === 'rank') || {}).detail || {};
    if (!route) return drawLists(body, r);
    const bridge = (await passagesById([route.bridge]).catch(() => new Map())).get(route.bridge);
    const p = route.p_union || 0;
    // No threshold in the trace (JSON has no infinity): the model never routes to Union.
    const threshold = typeof rank.threshold === 'number' ? rank.threshold : null;
    const gauge = h('div', { class: 'gauge' }, h('div', { class: 'fill' }), threshold === null ? null : h('div', { class: 'mark', title: `threshold ${threshold}` }));
    $('.fill', gauge).style.width = `${100 * p}%`;
    if (threshold !== null) $('.mark', gauge).style.left = `${100 * Math.min(1, threshold)}%`;
    const features = Object.entries(route.features || {});
    const text = bridge ? bridge.text : '';
    const sentence = route.b_rel ? route.b_rel.sentence : '';
    const at = sentence ? text.indexOf(sentence) : -1;
    const bridgeText = at >= 0 ? [text.slice(0, at), h('mark', { text: sentence }), text.slice(at + sentence.length)] : [text];
    body.replaceChildren(h('div', { class: 'two' },
      h('div', { class: 'panel' }, h('h3', { text: 'Decision' }),
        h('p', null, 'Action: ', h('strong', { text: rank.action === 'union' ? 'Union (question + bridge sentence)' : 'Q (the question alone)' }),
          rank.alpha ? ` · α ${fmt(rank.alpha, 2)}` : '', ` · router ${rank.router || ''}`),
        h('div', { class: 'muted small-text', text: threshold === null ? `P(union) = ${fmt(p)}; the model's threshold is infinite: it never routes to Union; model: ${route.model}` : `P(union) = ${fmt(p)} against the threshold ${fmt(threshold)} (red mark); model: ${route.model}` }), gauge,
        h('h3', { text: 'Features' }),
        h('table', null, features.map(([name, v]) => h('tr', null, h('td', { text: name }), h('td', { class: 'num', text: typeof v === 'number' ? fmt(v, 3) : String(v) }))))),
      h('div', { class: 'panel' }, h('h3', null, 'Bridge: ', bridge ? bridge.title : route.bridge, ' ', goldBadge(goldOf().get(route.bridge))),
        h('p', { class: 'muted small-text', text: sentence ? `B_rel, the sentence chosen (p = ${fmt(route.b_rel.probability)}), is marked:` : 'No sentence chosen.' }),
        h('p', null, bridgeText))),
      h('div', { class: 'panel' }, h('h3', { text: 'Passages returned' }), h('table', null, r.passages.map((pp) => passageRow(pp, pp.rank, h('td', { class: 'num', text: fmt(pp.score) }))))));
  }

  // Methods without hops (dense, bm25, hybrid): each step's list.
  async function drawLists(body, r) {
    const lists = r.trace.steps
      .map((st) => ({ name: st.name, top: Array.isArray(st.detail) ? st.detail : st.detail && st.detail.top }))
      .filter((x) => Array.isArray(x.top) && x.top.length && Array.isArray(x.top[0]));
    const positions = lists.flatMap((l) => l.top.map((x) => x[0]));
    await passagesAt(positions).catch(() => []);
    body.replaceChildren(h('p', { class: 'muted', text: 'This method has no hops: each step ranks passages directly. Its lists, as the trace keeps them (first 10):' }),
      h('div', { class: 'columns' }, lists.map((l) => h('div', { class: 'panel' }, h('h3', { text: l.name }),
        h('table', null, l.top.map(([idx, score], i) => {
          const p = S.passages.get(idx) || { id: String(idx), title: `passage ${idx}` };
          return passageRow(p, i + 1, h('td', { class: 'num', text: fmt(score) }));
        }))))));
  }

  // ---- Evaluation
  let evalBuilt = false;
  function buildEval() {
    if (evalBuilt) return;
    evalBuilt = true;
    $('#report-file').addEventListener('change', async (e) => {
      const file = e.target.files[0];
      if (!file) return;
      try {
        const report = JSON.parse(await file.text());
        if (!report.methods || !report.ks) throw new Error('not an evaluation report (hoprag eval --json writes one)');
        useReport(report, file.name);
        setUrl({ view: 'eval', run: null }, true);
        route();
      } catch (err) {
        message(`${file.name}: ${err.message}`);
      }
      e.target.value = '';
    });
    if (!S.dataset) return;
    const form = $('#eval-form');
    form.hidden = false;
    const defaults = shownFirst();
    for (const m of S.info.methods.filter((x) => x.available)) {
      $('#eval-methods').append(h('label', null, h('input', { type: 'checkbox', value: m.name, checked: defaults.includes(m.name) }), m.name));
      $('#eval-baseline').append(h('option', { value: m.name, text: m.name, selected: m.name === 'dense' }));
    }
    $('#eval-baseline').prepend(h('option', { value: '', text: 'none' }));
    const max = S.info.limits.max_eval_questions;
    $('#eval-limit').max = max;
    $('#eval-limit').value = Math.min(S.dataset.questions.length, max);
    form.addEventListener('submit', (e) => {
      e.preventDefault();
      const methods = $$('#eval-methods input:checked').map((i) => i.value);
      setUrl({ view: 'eval', run: 1, em: methods.join(','), eb: $('#eval-baseline').value, el: $('#eval-limit').value }, true);
      S.report = null;
      route();
    });
  }

  function useReport(report, source) {
    S.report = report;
    S.report.source = source;
    try {
      sessionStorage.setItem(REPORT_KEY, JSON.stringify(report));
    } catch (_) {
      // Too large for session storage: it stays for this page only.
    }
  }

  async function showEval(p) {
    buildEval();
    const out = $('#report');
    if (p.get('run')) {
      const methods = (p.get('em') || 'dense').split(',').filter(Boolean);
      const baseline = p.get('eb') || null;
      const limit = Number(p.get('el')) || 20;
      const runKey = JSON.stringify([methods, baseline, limit]);
      for (const input of $$('#eval-methods input')) input.checked = methods.includes(input.value);
      $('#eval-baseline').value = baseline || '';
      $('#eval-limit').value = limit;
      if (!S.report || S.report.runKey !== runKey) {
        out.replaceChildren(h('p', { class: 'muted', text: `evaluating ${methods.join(', ')} on ${limit} questions…` }));
        const report = await api('/v1/eval', { methods, baseline, limit });
        useReport(report, 'run on the server');
        S.report.runKey = runKey;
      }
    } else if (!S.report) {
      const kept = sessionStorage.getItem(REPORT_KEY);
      if (kept) S.report = JSON.parse(kept);
    }
    if (!S.report) {
      out.replaceChildren(h('p', { class: 'muted', text: S.dataset ? 'Open a report, or run an evaluation on the server\'s data set.' : 'Open a report written by hoprag eval --json. (A server started with --dataset FILE can also run one.)' }));
      return;
    }
    renderReport(out, S.report, p);
  }

  function renderReport(out, rep, p) {
    const names = Object.keys(rep.methods);
    const ks = rep.ks;
    const metric = p.get('metric') || 'recall';
    const typeK = Number(p.get('tk')) || (ks.includes(5) ? 5 : ks[0]);
    const color = new Map(names.map((n, i) => [n, colorOf(i)]));
    const unmatched = (rep.unmatched_gold || []).length;
    const summary = h('div', { class: 'panel' },
      h('h2', null, `${rep.dataset}: ${rep.n} questions`),
      h('div', { class: 'muted small-text', text: `index ${rep.index || '?'} · ${rep.source || ''}${unmatched ? ` · ${unmatched} gold passages not in the index (counted as missed)` : ''}` }));

    // Curves of a metric over the cutoffs.
    const metricNames = { recall: 'R@k', full: 'Full@k (all gold)', any: 'Any@k', last_hop: 'LastHop@k' };
    const metricSelect = h('select', null, Object.entries(metricNames).map(([v, t]) => h('option', { value: v, text: t, selected: v === metric })));
    metricSelect.addEventListener('change', () => { setUrl({ metric: metricSelect.value }, false); renderReport(out, rep, params()); });
    const curves = lineChart({
      xs: ks,
      series: names.map((n) => ({ name: n, color: color.get(n), values: ks.map((k) => rep.methods[n][metric] && rep.methods[n][metric][k]) })),
      xLabel: 'k (passages retrieved)', yLabel: metricNames[metric],
    });

    // Per question type, at one cutoff.
    const types = Object.keys(rep.methods[names[0]].by_type || {});
    const kSelect = h('select', null, ks.map((k) => h('option', { value: k, text: `R@${k}`, selected: k === typeK })));
    kSelect.addEventListener('change', () => { setUrl({ tk: kSelect.value }, false); renderReport(out, rep, params()); });
    const bars = barChart({
      groups: types.map((t) => `${t} (${rep.methods[names[0]].by_type[t].n})`),
      series: names.map((n) => ({ name: n, color: color.get(n), values: types.map((t) => rep.methods[n].by_type[t].recall[typeK]) })),
      yLabel: `R@${typeK}`,
    });
    const legend = h('div', { class: 'legend' }, names.map((n) => h('span', null, pill(color.get(n)), n)));
    const charts = h('div', { class: 'charts' },
      h('div', { class: 'panel' }, h('div', { class: 'row' }, h('h3', { class: 'grow', text: 'By cutoff' }), metricSelect), curves, legend),
      h('div', { class: 'panel' }, h('div', { class: 'row' }, h('h3', { class: 'grow', text: 'By question type' }), kSelect), bars, legend.cloneNode(true)));

    // The table, with the paired tests against the baseline.
    const base = rep.baseline;
    const lhK = ks.includes(5) ? 5 : ks[0];
    const table = h('table', null,
      h('tr', null, h('th', { text: 'method' }), ks.map((k) => h('th', { class: 'num', text: `R@${k}` })), ks.map((k) => h('th', { class: 'num', text: `Full@${k}` })),
        h('th', { class: 'num', text: 'p50 ms' }),
        base ? [h('th', { class: 'num', text: `W/L/T vs ${base}` }), h('th', { class: 'num', text: 'sign p' }), h('th', { class: 'num', text: 'Holm p' }), h('th', { class: 'num', text: `LastHop@${lhK} only m/only b (p)` })] : null),
      names.map((n) => {
        const m = rep.methods[n];
        const v = m.vs_baseline;
        const lh = v && v.last_hop && v.last_hop[lhK];
        return h('tr', null, h('td', null, pill(color.get(n)), n), ks.map((k) => h('td', { class: 'num', text: pct(m.recall[k]) })),
          ks.map((k) => h('td', { class: 'num', text: pct(m.full[k]) })), h('td', { class: 'num', text: fmt(m.latency_ms.p50, 2) }),
          base ? (v ? [h('td', { class: 'num', text: `${v.wins}/${v.losses}/${v.ties}` }), h('td', { class: 'num', text: fmt(v.sign_p, 4) }),
            h('td', { class: 'num', text: fmt(v.sign_p_holm, 4) }), h('td', { class: 'num', text: lh ? `${lh.only_method}/${lh.only_baseline} (${fmt(lh.p, 3)})` : 'n/a' })]
            : [h('td', { class: 'num muted', text: 'baseline' }), h('td'), h('td'), h('td')]) : null);
      }));
    const tablePanel = h('div', { class: 'panel' }, h('h3', { text: 'Methods' }), table,
      base ? h('p', { class: 'muted small-text', text: `W/L/T: questions where the method's R@5 is above / below / equal to ${base}'s; exact sign test, two-sided; Holm over the methods. LastHop: questions whose last hop only the method (m) or only the baseline (b) finds, with McNemar's exact test.` }) : null);

    out.replaceChildren(summary, charts, tablePanel, flipsPanel(rep, p, names), topFlips(rep));
  }

  function pill(color) {
    const el = h('span', { class: 'pill' });
    el.style.background = color;
    return el;
  }

  // Questions one method gets and another misses: R@k differs between the two.
  function flipsPanel(rep, p, names) {
    const panel = h('div', { class: 'panel flips' });
    if (names.length < 2) return panel;
    const best = [...names].sort((a, b) => (rep.methods[b].recall[5] || 0) - (rep.methods[a].recall[5] || 0));
    const a = names.includes(p.get('fa')) ? p.get('fa') : rep.baseline && names.includes(rep.baseline) ? rep.baseline : best[best.length - 1];
    const b = names.includes(p.get('fb')) && p.get('fb') !== a ? p.get('fb') : best.find((n) => n !== a);
    const k = rep.ks.includes(5) ? 5 : rep.ks[0];
    const pick = (value, key) => {
      const sel = h('select', null, names.map((n) => h('option', { value: n, text: n, selected: n === value })));
      sel.addEventListener('change', () => { setUrl({ [key]: sel.value }, false); $('#report').replaceChildren(); renderReport($('#report'), rep, params()); });
      return sel;
    };
    const qa = rep.methods[a].per_query, qb = rep.methods[b].per_query;
    const rows = [];
    for (let i = 0; i < qa.length && i < qb.length; i++) {
      const ra = qa[i].recall[k] || 0, rb = qb[i].recall[k] || 0;
      if (qa[i].id === qb[i].id && ra !== rb) rows.push({ q: qa[i], ra, rb });
    }
    rows.sort((x, y) => Math.abs(y.rb - y.ra) - Math.abs(x.rb - x.ra) || x.q.id.localeCompare(y.q.id));
    const wins = rows.filter((x) => x.rb > x.ra).length;
    const text = new Map(S.dataset ? S.dataset.questions.map((q) => [q.id, q.text]) : []);
    const questions = (n) => `${n} question${n === 1 ? '' : 's'}`;
    panel.append(h('div', { class: 'row' }, h('h3', { class: 'grow', text: `Flips at R@${k}: ${questions(wins)} where ${b} finds more gold, ${questions(rows.length - wins)} where ${a} does` }), pick(a, 'fa'), ' vs ', pick(b, 'fb')));
    const list = h('ul');
    for (const x of rows.slice(0, 200)) {
      const up = x.rb > x.ra;
      list.append(h('li', null, h('span', { class: up ? 'badge ok' : 'badge miss', text: `${pct(x.ra)} → ${pct(x.rb)}` }), ' ',
        link({ view: 'ask', qid: x.q.id, q: null, methods: `${a},${b}`, k, run: null, em: null, eb: null, el: null, metric: null, tk: null, fa: null, fb: null }, x.q.id),
        x.q.type ? h('span', { class: 'muted', text: ` · ${x.q.type}` }) : null,
        text.has(x.q.id) ? h('span', { text: ` · ${cut(text.get(x.q.id), 110)}` }) : null));
    }
    if (!rows.length) list.append(h('li', { class: 'muted', text: 'The two methods find the same share of gold on every question.' }));
    if (!S.dataset) panel.append(h('p', { class: 'muted small-text', text: 'The links open the question side by side when the server has this data set (--dataset).' }));
    panel.append(list);
    return panel;
  }

  // `hoprag eval --flips`: top-1 flips per type.
  function topFlips(rep) {
    if (!rep.flips || !rep.flips.length) return h('div');
    return h('div', { class: 'panel' }, rep.flips.map((f) => [h('h3', { text: `Top-1 flips ${f.from} → ${f.to} (productive: R@${f.k} rises)` }),
      h('table', null, h('tr', null, ['type', 'n', 'flips', 'rate', 'productive', 'harmful', 'ΔR'].map((t) => h('th', { text: t }))),
        [...Object.entries(f.by_type), ['all', f.all]].map(([t, x]) => h('tr', null, h('td', { text: t }), h('td', { text: x.n }), h('td', { text: x.flips }),
          h('td', { text: pct(x.flip_rate) }), h('td', { text: x.productive }), h('td', { text: x.harmful }), h('td', { text: `${(100 * x.recall_delta).toFixed(1)}pp` }))))]));
  }

  function axes(svg, W, H, m, yLabel, xLabel) {
    for (let t = 0; t <= 1.0001; t += 0.2) {
      const y = m.t + (1 - t) * (H - m.t - m.b);
      svg.append(s('line', { class: 'grid', x1: m.l, x2: W - m.r, y1: y, y2: y }), s('text', { x: m.l - 6, y: y + 4, 'text-anchor': 'end', text: `${Math.round(t * 100)}` }));
    }
    svg.append(s('line', { class: 'axis', x1: m.l, x2: m.l, y1: m.t, y2: H - m.b }), s('line', { class: 'axis', x1: m.l, x2: W - m.r, y1: H - m.b, y2: H - m.b }));
    svg.append(s('text', { x: 14, y: m.t + (H - m.t - m.b) / 2, transform: `rotate(-90 14 ${m.t + (H - m.t - m.b) / 2})`, 'text-anchor': 'middle', text: `${yLabel} (%)` }));
    if (xLabel) svg.append(s('text', { x: m.l + (W - m.l - m.r) / 2, y: H - 4, 'text-anchor': 'middle', text: xLabel }));
  }

  function lineChart({ xs, series, xLabel, yLabel }) {
    const W = 560, H = 300, m = { l: 48, r: 16, t: 12, b: 42 };
    const svg = s('svg', { class: 'chart line-chart', viewBox: `0 0 ${W} ${H}`, role: 'img', 'aria-label': yLabel });
    axes(svg, W, H, m, yLabel, xLabel);
    const lo = Math.min(...xs), hi = Math.max(...xs);
    const x = (k) => m.l + ((k - lo) / Math.max(1, hi - lo)) * (W - m.l - m.r);
    const y = (v) => m.t + (1 - v) * (H - m.t - m.b);
    for (const k of xs) svg.append(s('text', { x: x(k), y: H - m.b + 16, 'text-anchor': 'middle', text: k }));
    for (const sr of series) {
      const pts = xs.map((k, i) => [k, sr.values[i]]).filter(([, v]) => typeof v === 'number');
      if (!pts.length) continue;
      svg.append(s('path', { class: 'line', stroke: sr.color, d: pts.map(([k, v], i) => `${i ? 'L' : 'M'}${x(k)},${y(v)}`).join(' ') }));
      for (const [k, v] of pts) svg.append(s('circle', { cx: x(k), cy: y(v), r: 3.5, fill: sr.color }, s('title', { text: `${sr.name}: ${pct(v)} at k=${k}` })));
    }
    return svg;
  }

  function barChart({ groups, series, yLabel }) {
    const W = 560, H = 300, m = { l: 48, r: 16, t: 12, b: 42 };
    const svg = s('svg', { class: 'chart bar-chart', viewBox: `0 0 ${W} ${H}`, role: 'img', 'aria-label': yLabel });
    axes(svg, W, H, m, yLabel, null);
    const gw = (W - m.l - m.r) / Math.max(1, groups.length);
    const bw = Math.min(28, (gw * 0.8) / Math.max(1, series.length));
    groups.forEach((g, gi) => {
      const x0 = m.l + gi * gw + (gw - bw * series.length) / 2;
      series.forEach((sr, si) => {
        const v = sr.values[gi];
        if (typeof v !== 'number') return;
        const top = m.t + (1 - v) * (H - m.t - m.b);
        svg.append(s('rect', { class: 'bar-rect', x: x0 + si * bw, y: top, width: bw - 2, height: H - m.b - top, fill: sr.color }, s('title', { text: `${sr.name}, ${g}: ${pct(v)}` })));
      });
      svg.append(s('text', { x: m.l + gi * gw + gw / 2, y: H - m.b + 16, 'text-anchor': 'middle', text: cut(g, 22) }));
    });
    return svg;
  }

  // ---- Index
  async function showIndex(p) {
    const info = S.info;
    const m = info.manifest;
    const g = m.graph;
    const card = (value, label, small) => h('div', { class: 'card' }, h('div', { class: 'value' + (small ? ' small' : ''), text: value }), h('div', { class: 'label', text: label }));
    const date = (t) => (t ? new Date(t * 1000).toISOString().slice(0, 16).replace('T', ' ') : '–');
    const cards = h('div', { class: 'cards' },
      card(info.passages.toLocaleString(), 'passages'), card(info.generation, 'generation', true),
      card(`${info.store}: ${info.location}`, 'store', true), card(`${m.embedder.id} (${m.embedder.dim})`, 'embedder', true),
      card(String(m.vector_index), 'vector index', true), card(g ? g.source.split('/').pop() : 'none', 'entity graph (triples)', true),
      card(date(m.updated_at), 'updated (UTC)', true));
    const stats = g ? h('table', null, Object.entries(g.stats).filter(([, v]) => typeof v === 'number').map(([k, v]) =>
      h('tr', null, h('td', { text: k.replace(/_/g, ' ') }), h('td', { class: 'num', text: Number.isInteger(v) ? v.toLocaleString() : v.toFixed(2) }))))
      : h('p', { class: 'muted', text: 'This index has no entity graph: hoprag graph --index DIR --extract heuristic (or --triples OPENIE.json) adds one.' });
    // Methods that cannot run, grouped by why (the reasons are long and shared).
    const why = new Map();
    for (const x of info.methods.filter((x) => !x.available)) why.set(x.reason, [...(why.get(x.reason) || []), x.name]);
    const methods = h('div', null,
      h('p', null, h('span', { class: 'muted', text: 'Run here: ' }), info.methods.filter((x) => x.available).map((x, i) => [i ? ', ' : '', h('strong', { title: S.descriptions.get(x.name) || '', text: x.name })])),
      [...why].map(([reason, names]) => h('p', null, h('span', { class: 'muted', text: 'Not here: ' }), names.join(', '),
        h('details', { class: 'small-text' }, h('summary', { text: cut(reason, 70) }), reason))));
    const top = info.top_entities.length ? h('p', null, 'Most mentioned: ', info.top_entities.map((e, i) => [i ? ', ' : '', link({ view: 'index', entity: e.label }, e.label), h('span', { class: 'muted', text: ` (${e.passages})` })])) : null;
    const data = info.dataset ? h('p', null, `Data set: ${info.dataset.name} (${info.dataset.format}, ${info.dataset.questions} questions)`) : null;
    $('#index-info').replaceChildren(cards, h('div', { class: 'two' },
      h('div', { class: 'panel' }, h('h3', { text: 'Graph statistics' }), stats, top),
      h('div', { class: 'panel' }, h('h3', { text: 'Methods' }), methods, h('h3', { text: 'Sources' }), h('ul', null, m.sources.map((x) => h('li', { text: x }))), data)));
    const form = $('#entity-form');
    form.hidden = !g;
    form.onsubmit = (e) => {
      e.preventDefault();
      setUrl({ view: 'index', entity: $('#entity').value.trim() }, true);
      route();
    };
    const name = p.get('entity');
    $('#entity').value = name || '';
    if (!name || !g) {
      $('#entity-view').replaceChildren();
      return;
    }
    const nb = await api('/v1/graph/entity?name=' + encodeURIComponent(name));
    const nodes = [{ key: 'c', label: nb.entity.label, r: 12, color: 'var(--seed)', title: `${nb.entity.label}: ${nb.passage_count} passages` }];
    const maxW = Math.max(1e-9, ...nb.neighbours.map((x) => x.weight));
    for (const x of nb.neighbours) {
      nodes.push({ key: 'n' + x.id, label: x.label, r: 4 + 8 * Math.sqrt(x.weight / maxW), color: x.kind === 'synonym' ? '#9b6dc6' : 'var(--entity)',
        title: `${x.label}\n${x.kind}, weight ${fmt(x.weight, 2)}${x.predicates.length ? '\n' + x.predicates.join('; ') : ''}`,
        onclick: () => { setUrl({ view: 'index', entity: x.label }, true); route(); } });
    }
    const edges = nb.neighbours.map((x) => ({ a: 'c', b: 'n' + x.id, kind: x.kind, label: x.predicates[0] || null, title: x.predicates.join('; ') || x.kind }));
    $('#entity-view').replaceChildren(h('div', { class: 'hops-grid' },
      h('div', { class: 'panel' }, h('h3', { text: `${nb.entity.label}: ${nb.neighbours.length} neighbours shown, mentioned by ${nb.passage_count} passages` }),
        nb.neighbours.length ? graphView(nodes, edges, {}) : h('p', { class: 'muted', text: 'No edges: only passages mention it.' }),
        nb.candidates.length ? h('p', { class: 'small-text' }, 'Also: ', nb.candidates.map((c, i) => [i ? ', ' : '', link({ view: 'index', entity: c.label }, c.label)])) : null),
      h('div', null,
        h('div', { class: 'panel scroll' }, h('h3', { text: `Triples naming it (${nb.triples.length}${nb.triples.length >= 50 ? '+' : ''})` }), h('table', null, nb.triples.map((t) => h('tr', null, h('td', { text: t.subject }), h('td', { class: 'muted', text: t.predicate }), h('td', { text: t.object }))))),
        h('div', { class: 'panel' }, h('h3', { text: 'Passages mentioning it' }), h('ul', null, nb.passages.map((x) => h('li', null, x.title, ' ', h('span', { class: 'muted small-text', text: x.id }))))))));
  }

  // ---- Start
  async function start() {
    for (const a of $$('#tabs a')) {
      a.addEventListener('click', (e) => {
        e.preventDefault();
        S.loadedTrace = null;
        setUrl({ view: a.dataset.view }, true);
        route();
      });
    }
    window.addEventListener('popstate', route);
    $('#token-button').addEventListener('click', () => askToken().then(() => location.reload()));
    try {
      const r = await fetch('/health');
      S.health = await r.json();
    } catch (e) {
      message('The server does not answer: ' + e.message);
      return;
    }
    $('#token-button').hidden = !S.health.token_required;
    try {
      await pickNamespace();
      const [info, methods] = await Promise.all([api('/v1/index'), api('/v1/methods')]);
      S.info = info;
      for (const m of methods.methods) S.descriptions.set(m.name, m.description);
      S.defaultMethod = methods.default;
      if (info.dataset) S.dataset = await api('/v1/dataset');
    } catch (e) {
      showError(e);
      return;
    }
    $('#server').textContent = `${S.info.passages.toLocaleString()} passages · generation ${S.info.generation} · v${S.health.version}`;
    route();
  }
  // The namespace of the URL (`ns`), if the token opens it; else the default one if it
  // opens that, else the first it opens. The select shows the token's namespaces only.
  async function pickNamespace() {
    const names = (await api('/v1/namespaces')).namespaces.map((n) => n.name);
    const asked = new URLSearchParams(location.search).get('ns');
    const pick = names.includes(asked) ? asked : names.includes('default') ? 'default' : names[0];
    S.namespace = pick && pick !== 'default' ? pick : null;
    const select = $('#namespace');
    select.replaceChildren(...names.map((n) => h('option', { value: n, selected: n === pick }, n)));
    $('#namespace-label').hidden = names.length < 2 && !S.namespace;
    select.addEventListener('change', () => {
      const url = new URL(location.href);
      url.searchParams.set('ns', select.value);
      location.href = url.toString();
    });
  }

  start();
})();
