//! The scale benchmark's report as text.

use super::*;

pub(super) fn print(r: &Report) {
    let (s, b) = (&r.source, &r.build);
    println!(
        "{} passages (seed {}) recombined from {} sentences of {} 2wiki passages in {:.1}s; {} duplicate compositions \
         redrawn, {} dropped; {} threads",
        r.passages,
        r.seed,
        s.sentences,
        s.passages,
        s.generate_secs,
        s.duplicates_redrawn,
        s.duplicates_dropped,
        r.threads
    );
    println!(
        "embedder: MiniLM vectors of {} words ({}, {:.1}s) composed; {:.1}s embedding {} texts ({} unknown words), \
         excluded below",
        s.vocabulary_words,
        if s.word_vectors_cached { "cached" } else { "embedded now" },
        s.word_vectors_secs,
        b.embed_secs,
        b.embedder.texts,
        b.embedder.unknown_words
    );
    if let Some(g) = &b.graph {
        println!(
            "graph: {} entities, {} triples ({} distinct facts), {} relation edges, {} synonym links, {} passages \
             without entities",
            g.entities, g.triples, g.facts, g.relation_edges, g.synonym_edges, g.isolated_passages
        );
    }
    let header: Vec<String> = ["build step (embedding excluded)", "secs"].map(String::from).to_vec();
    let rows: Vec<Vec<String>> = [
        ("lexical index", b.lexical_secs),
        ("hnsw graph", b.hnsw_secs),
        ("index write", b.index_write_secs),
        ("index total", b.index_secs_excluding_embedding),
        ("graph: heuristic extraction", b.graph_extract_secs),
        ("graph: structure + synonyms", b.graph_structure_secs),
        ("graph: split walk solved", b.graph_walk_secs),
        ("graph: write (with the index's load)", b.graph_write_secs),
        ("graph total", b.graph_secs_excluding_embedding),
        ("build total", b.total_secs_excluding_embedding),
    ]
    .iter()
    .filter(|(n, _)| if n.starts_with("graph") { b.graph.is_some() } else { b.index_built })
    .map(|(n, v)| vec![n.to_string(), format!("{v:.1}")])
    .collect();
    println!("{}", table(&header, &rows));
    println!("peak memory of the build: {:.0} MB", r.build_peak_rss_mb);
    if let Some(q) = &r.queries {
        print_queries(q);
    }
    if let Some(e) = &r.edits {
        edits::print(e);
    }
}

pub(super) fn print_queries(q: &QueryReport) {
    println!(
        "on disk: {:.1} MB (graph {}); open {:.1}s + graph {:.1}s; memory after open {:.0} MB ({:.0} MB of it \
         mapped files), peak while querying {:.0} MB, after the last query {:.0} MB ({:.0} MB mapped files)",
        q.disk_bytes as f64 / 1e6,
        q.graph_bytes.map_or("not measured separately".into(), |b| format!("{:.1} MB", b as f64 / 1e6)),
        q.open_secs,
        q.graph_load_secs,
        q.rss_after_open_mb,
        q.rss_file_after_open_mb,
        q.peak_rss_mb,
        q.rss_at_end_mb,
        q.rss_file_at_end_mb
    );
    println!(
        "{} questions × {} passes, k = {}, one at a time, question vector given; hnsw recall@{} vs exact: {:.3}",
        q.questions, q.repeat, q.k, q.k, q.hnsw_recall_at_k
    );
    if !q.hnsw_breadths.is_empty() {
        let header: Vec<String> = ["hnsw breadth (ef)", "recall@k", "p50 ms", "p99 ms"].map(String::from).to_vec();
        let rows: Vec<Vec<String>> = q
            .hnsw_breadths
            .iter()
            .map(|b| {
                let name = if b.default { format!("{} (default)", b.breadth) } else { b.breadth.to_string() };
                vec![name, format!("{:.3}", b.recall_at_k), format!("{:.2}", b.ms.p50), format!("{:.2}", b.ms.p99)]
            })
            .collect();
        println!("{}", table(&header, &rows));
    }
    let header: Vec<String> =
        ["method", "p50 ms", "p99 ms", "mean ms", "split fell back", "split unproven"].map(String::from).to_vec();
    let rows: Vec<Vec<String>> = q
        .latency_ms
        .iter()
        .map(|l| {
            vec![
                l.method.clone(),
                format!("{:.2}", l.ms.p50),
                format!("{:.2}", l.ms.p99),
                format!("{:.2}", l.mean_ms),
                l.split_fallbacks.to_string(),
                l.split_unproven.to_string(),
            ]
        })
        .collect();
    println!("{}", table(&header, &rows));
    if !has_graph_methods(q) {
        println!("no graph method timed (no entity graph, or none in --methods)");
        return;
    }
    if let Some(p) = &q.ppr_precompute {
        println!(
            "split walk prepared in {:.1}s ({}; the solve took {:.1}s), {} form, {} iterations (contraction {:.3}), \
             {:.1} MB; memory after it {:.0} MB; {} timed ppr queries fell back to the full walk",
            p.secs,
            if p.stored { "from the solution stored with the graph" } else { "solved now" },
            p.solve_secs,
            p.form,
            p.iterations,
            p.contraction,
            p.bytes as f64 / 1e6,
            q.rss_after_precompute_mb,
            q.ppr_split_fallbacks
        );
    } else {
        println!("no split walk: every ppr query runs the full walk");
    }
    for a in &q.agreement {
        println!(
            "{} against the full walk on {} questions: top-{} overlap {:.3}, {} identical; full walk p50 {:.1} ms, p99 \
             {:.1} ms",
            a.method, a.questions, q.k, a.top_k_overlap, a.identical, a.full_walk_ms.p50, a.full_walk_ms.p99
        );
    }
    for l in q.latency_ms.iter().filter(|l| is_graph_method(&l.method)) {
        let steps: Vec<String> = l.steps.iter().map(|(n, ms)| format!("{n} {ms:.2}")).collect();
        println!("{} mean ms per step: {}", l.method, steps.join(", "));
    }
    println!("{} of {} questions seeded no entity (ppr answered them by dense)", q.ppr_dense_fallbacks, q.questions);
    if !q.filtered.is_empty() {
        println!("under metadata filters (the same questions, one pass each: unfiltered, 10 %, 1 %):");
        let header: Vec<String> = [
            "method",
            "filter",
            "matching",
            "unfiltered p50 / p99 ms",
            "filtered p50 / p99 ms",
            "p50 ratio",
            "k returned",
            "walks: split proven / estimated / full",
        ]
        .map(String::from)
        .to_vec();
        let rows: Vec<Vec<String>> = q
            .filtered
            .iter()
            .map(|f| {
                vec![
                    f.method.clone(),
                    f.share.clone(),
                    f.matching.to_string(),
                    format!("{:.2} / {:.2}", f.unfiltered_ms.p50, f.unfiltered_ms.p99),
                    format!("{:.2} / {:.2}", f.filtered_ms.p50, f.filtered_ms.p99),
                    format!("{:.2}x", f.p50_ratio),
                    f.full_answers.to_string(),
                    match f.walks.any() {
                        true => format!("{} / {} / {}", f.walks.split_proven, f.walks.split_estimated, f.walks.full),
                        false => "-".into(),
                    },
                ]
            })
            .collect();
        println!("{}", table(&header, &rows));
    }
}
