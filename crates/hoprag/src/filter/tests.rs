use proptest::prelude::*;
use serde_json::{json, Value};

use super::*;

fn meta(value: Value) -> Meta {
    match value {
        Value::Object(map) => map,
        other => panic!("not an object: {other}"),
    }
}

fn parse_err(filter: Value) -> String {
    match Filter::parse(&filter) {
        Ok(parsed) => panic!("parsed {filter}: {parsed:?}"),
        Err(e) => e.to_string(),
    }
}

/// Asserts both evaluators give `expected` on each meta (`Value::Null`: no meta).
fn check(filter: Value, metas: &[Value], expected: &[bool]) {
    let parsed = Filter::parse(&filter).unwrap_or_else(|e| panic!("{filter}: {e}"));
    let metas: Vec<Option<Meta>> =
        metas.iter().map(|m| if m.is_null() { None } else { Some(meta(m.clone())) }).collect();
    let columns = MetaColumns::build(metas.iter().map(Option::as_ref));
    let selection = parsed.select(&columns);
    for (i, (m, &want)) in metas.iter().zip(expected).enumerate() {
        assert_eq!(parsed.matches(m.as_ref()), want, "matches: {filter} on {m:?}");
        assert_eq!(selection.contains(i), want, "select: {filter} on {m:?}");
    }
    assert_eq!(selection.count(), expected.iter().filter(|&&b| b).count(), "count: {filter}");
}

// ---- parse errors ----

#[test]
fn filter_error_non_object() {
    for bad in [json!([1]), json!("x"), json!(null), json!(3)] {
        assert!(parse_err(bad.clone()).starts_with("filter: expected a filter object, found"), "{bad}");
    }
    assert!(parse_err(json!({"$and": [{"a": 1}, 7]})).starts_with("filter.$and[1]: expected a filter object"));
    assert!(parse_err(json!({"$not": []})).starts_with("filter.$not: expected a filter object"));
    let e = "{not json".parse::<Filter>().unwrap_err();
    assert_eq!(e.at(), "filter");
    assert!(e.message().starts_with("invalid JSON"), "{e}");
}

#[test]
fn filter_error_unknown_operator() {
    let e = parse_err(json!({"year": {"$regex": "a"}}));
    assert!(e.starts_with("filter.year.$regex: unknown operator (known: $eq, $ne,"), "{e}");
    let e = parse_err(json!({"$and": [{"a": {"$foo": 1}}]}));
    assert!(e.starts_with("filter.$and[0].a.$foo: unknown operator"), "{e}");
    let e = parse_err(json!({"$eq": 1}));
    assert!(e.starts_with("filter.$eq: unknown operator (known here: $and, $or, $not"), "{e}");
}

#[test]
fn filter_error_eq_object_or_array() {
    let e = parse_err(json!({"author": {"name": "x"}}));
    assert!(e.starts_with("filter.author: expected") && e.contains("\"author.name\""), "{e}");
    let e = parse_err(json!({"author": {"$eq": {"name": "x"}}}));
    assert!(e.starts_with("filter.author.$eq: expected a string, number, boolean or null, found an object"), "{e}");
    let e = parse_err(json!({"tags": ["a", "b"]}));
    assert!(e.starts_with("filter.tags: expected") && e.contains("$in"), "{e}");
    let e = parse_err(json!({"tags": {"$ne": ["a"]}}));
    assert!(e.starts_with("filter.tags.$ne: expected") && e.contains("found an array"), "{e}");
    let e = parse_err(json!({"year": {"$gte": 1, "lt": 2}}));
    assert!(e.starts_with("filter.year: expected an operator") && e.contains("\"lt\""), "{e}");
    let e = parse_err(json!({"year": {}}));
    assert!(e.starts_with("filter.year: empty condition"), "{e}");
}

#[test]
fn filter_error_range_bound() {
    let e = parse_err(json!({"$and": [{"a": 1}, {"year": {"$gte": "abc"}}]}));
    assert_eq!(e, "filter.$and[1].year.$gte: expected a number or an ISO-8601 date, found \"abc\"");
    for bad in [json!(true), json!(null), json!([2000]), json!({"y": 1}), json!("2020-13-01"), json!("05/01/2020")] {
        let e = parse_err(json!({"y": {"$lt": bad}}));
        assert!(e.starts_with("filter.y.$lt: expected a number or an ISO-8601 date"), "{e}");
    }
    // A date-time without offset is no instant; the message says what is missing.
    let e = parse_err(json!({"y": {"$gt": "2020-05-01T12:00:00"}}));
    assert!(e.contains("needs an offset or Z"), "{e}");
    for good in ["2020-05-01", "2020-05-01T12:00:00Z", "2020-05-01T12:00:00+02:00", "2020-05-01T12:00:00.25-05:30"] {
        assert!(Filter::parse(&json!({"y": {"$gt": good}})).is_ok(), "{good}");
    }
}

#[test]
fn filter_error_in_and_exists() {
    let e = parse_err(json!({"tags": {"$in": "a"}}));
    assert!(e.starts_with("filter.tags.$in: expected an array of values, found \"a\""), "{e}");
    let e = parse_err(json!({"tags": {"$nin": ["a", {"b": 1}]}}));
    assert!(e.starts_with("filter.tags.$nin[1]: expected a string, number, boolean or null"), "{e}");
    let many: Vec<usize> = (0..=MAX_VALUES).collect();
    let e = parse_err(json!({"id": {"$in": many}}));
    assert!(e.starts_with("filter.id.$in: 1025 values, more than 1024"), "{e}");
    let fine: Vec<usize> = (0..MAX_VALUES).collect();
    assert!(Filter::parse(&json!({"id": {"$in": fine}})).is_ok());
    let e = parse_err(json!({"a": {"$exists": 1}}));
    assert_eq!(e, "filter.a.$exists: expected true or false, found 1");
}

#[test]
fn filter_error_logical_arrays() {
    for op in ["$and", "$or"] {
        let e = parse_err(json!({op: []}));
        assert_eq!(e, format!("filter.{op}: expected a non-empty array of filters, found []"));
        let e = parse_err(json!({op: {"a": 1}}));
        assert!(e.starts_with(&format!("filter.{op}: expected a non-empty array")), "{e}");
    }
}

#[test]
fn filter_error_paths() {
    assert_eq!(parse_err(json!({"": 1})), "filter.: empty field path");
    for bad in ["a..b", ".a", "a."] {
        let e = parse_err(json!({"$or": [{bad: 1}]}));
        assert!(e.starts_with(&format!("filter.$or[0].{bad}: empty segment in field path")), "{e}");
    }
    let long = "a".repeat(MAX_PATH_BYTES + 1);
    assert!(parse_err(json!({long.clone(): 1})).ends_with("field path longer than 256 bytes"));
    assert!(Filter::parse(&json!({&long[1..]: 1})).is_ok());
}

#[test]
fn filter_error_string_length() {
    let long = "x".repeat(MAX_STRING_BYTES + 1);
    assert_eq!(parse_err(json!({"a": long.clone()})), "filter.a: string longer than 1024 bytes");
    assert_eq!(
        parse_err(json!({"a": {"$in": ["ok", long.clone()]}})),
        "filter.a.$in[1]: string longer than 1024 bytes"
    );
    assert!(Filter::parse(&json!({"a": &long[1..]})).is_ok());
    // The error quotes a long value cut short.
    let e = parse_err(json!({"a": {"$gt": &long[600..]}}));
    assert!(e.len() < 150 && e.ends_with("..."), "{e}");
}

#[test]
fn filter_error_depth() {
    let nest = |levels: usize| (0..levels).fold(json!({"a": 1}), |inner, _| json!({"$not": inner}));
    // The outer object is level 1: fifteen $not make sixteen levels.
    assert!(Filter::parse(&nest(MAX_DEPTH - 1)).is_ok());
    let e = parse_err(nest(MAX_DEPTH));
    assert!(e.ends_with(": nested deeper than 16 levels") && e.starts_with("filter.$not.$not."), "{e}");
    let e = parse_err((0..40).fold(json!({"a": 1}), |inner, _| json!({"$and": [inner]})));
    assert!(e.ends_with("nested deeper than 16 levels"), "{e}");
}

#[test]
fn filter_error_conditions() {
    let conditions = |n: usize| json!({"$and": (0..n).map(|i| json!({"a": i})).collect::<Vec<_>>()});
    assert!(Filter::parse(&conditions(MAX_CONDITIONS)).is_ok());
    let e = parse_err(conditions(MAX_CONDITIONS + 1));
    assert_eq!(e, "filter.$and[256].a: more than 256 conditions in the filter");
    // Each operator of a condition object counts.
    let ops: Vec<Value> = (0..MAX_CONDITIONS / 2 + 1).map(|i| json!({"a": {"$gt": i, "$lt": i + 5}})).collect();
    assert!(parse_err(json!({"$or": ops})).ends_with("more than 256 conditions in the filter"));
}

// ---- semantics ----

#[test]
fn filter_numbers_strings_and_types() {
    let metas = [
        json!({"year": 2000}),
        json!({"year": 2000.0}),
        json!({"year": "2000"}),
        json!({"year": 2001}),
        json!({"year": true}),
        json!({"year": null}),
        json!({}),
        Value::Null,
    ];
    check(json!({"year": 2000}), &metas, &[true, true, false, false, false, false, false, false]);
    check(json!({"year": {"$eq": 2000.0}}), &metas, &[true, true, false, false, false, false, false, false]);
    check(json!({"year": "2000"}), &metas, &[false, false, true, false, false, false, false, false]);
    check(json!({"year": true}), &metas, &[false, false, false, false, true, false, false, false]);
    check(json!({"year": 1}), &[json!({"year": true})], &[false]);
    check(json!({"year": null}), &metas, &[false, false, false, false, false, true, false, false]);
    check(json!({"s": "Wiki"}), &[json!({"s": "wiki"}), json!({"s": "Wiki"})], &[false, true]);
}

#[test]
fn filter_negations_match_missing() {
    let metas = [json!({"s": "wiki"}), json!({"s": "news"}), json!({"t": 1}), Value::Null, json!({"s": null})];
    check(json!({"s": {"$ne": "wiki"}}), &metas, &[false, true, true, true, true]);
    check(json!({"s": {"$nin": ["wiki", "blog"]}}), &metas, &[false, true, true, true, true]);
    check(json!({"s": {"$exists": false}}), &metas, &[false, false, true, true, false]);
    check(json!({"$not": {"s": "wiki"}}), &metas, &[false, true, true, true, true]);
    check(json!({"s": {"$in": ["wiki", "blog"]}}), &metas, &[true, false, false, false, false]);
    check(json!({"s": {"$exists": true}}), &metas, &[true, true, false, false, true]);
    check(json!({"s": {"$in": []}}), &metas, &[false; 5]);
    check(json!({"s": {"$nin": []}}), &metas, &[true; 5]);
    check(json!({}), &metas, &[true; 5]);
    check(json!({"$not": {}}), &metas, &[false; 5]);
}

#[test]
fn filter_arrays_match_any_element() {
    let metas = [json!({"tags": ["a", "b"]}), json!({"tags": ["c"]}), json!({"tags": []}), json!({"tags": "a"})];
    check(json!({"tags": "a"}), &metas, &[true, false, false, true]);
    check(json!({"tags": {"$in": ["b", "c"]}}), &metas, &[true, true, false, false]);
    // The negation of "some element is a": no element is.
    check(json!({"tags": {"$ne": "a"}}), &metas, &[false, true, true, false]);
    check(json!({"tags": {"$nin": ["a", "c"]}}), &metas, &[false, false, true, false]);
    let nums = [json!({"n": [1, 5, 10]}), json!({"n": [2, 3]}), json!({"n": [[7]]}), json!({"n": [null, true]})];
    check(json!({"n": {"$gt": 8}}), &nums, &[true, false, false, false]);
    check(json!({"n": {"$gte": 2, "$lte": 2}}), &nums, &[true, true, false, false]);
    check(json!({"n": 2}), &nums, &[false, true, false, false]);
    // Each operator may hold on a different element (as in MongoDB).
    check(json!({"n": {"$gt": 4, "$lt": 2}}), &nums, &[true, false, false, false]);
    check(json!({"n": 7}), &nums, &[false, false, false, false]);
    check(json!({"n": null}), &nums, &[false, false, false, true]);
    check(json!({"n": true}), &nums, &[false, false, false, true]);
}

#[test]
fn filter_ranges_numbers() {
    let metas =
        [json!({"y": 1999}), json!({"y": 2000}), json!({"y": 2009.5}), json!({"y": 2010}), json!({"y": "2005"})];
    check(json!({"y": {"$gte": 2000, "$lt": 2010}}), &metas, &[false, true, true, false, false]);
    check(json!({"y": {"$gt": 2000}}), &metas, &[false, false, true, true, false]);
    check(json!({"y": {"$lte": 2000}}), &metas, &[true, true, false, false, false]);
    // A date bound on numbers: no match, no error.
    check(json!({"y": {"$gt": "1970-01-01"}}), &metas, &[false; 5]);
    check(json!({"y": {"$lt": 2010}}), &[json!({"y": "2000-01-01"}), json!({"y": true})], &[false, false]);
}

#[test]
fn filter_ranges_dates() {
    let metas = [
        json!({"d": "2020-05-01"}),
        json!({"d": "2020-05-01T10:00:00Z"}),
        json!({"d": "2020-05-01T12:00:00+02:00"}),
        json!({"d": "2020-04-30T23:59:59-01:00"}),
        json!({"d": "yesterday"}),
        json!({"d": 1588327200}),
        json!({"d": "2020-05-01T10:00:00"}),
    ];
    // 12:00+02:00 is 10:00Z; 23:59:59-01:00 on the 30th is 00:59:59Z on the 1st.
    check(json!({"d": {"$gte": "2020-05-01T10:00:00Z"}}), &metas, &[false, true, true, false, false, false, false]);
    check(json!({"d": {"$gt": "2020-05-01"}}), &metas, &[false, true, true, true, false, false, false]);
    check(json!({"d": {"$lte": "2020-05-01"}}), &metas, &[true, false, false, false, false, false, false]);
    check(
        json!({"d": {"$gte": "2020-05-01T00:00:00Z", "$lt": "2020-05-01T01:00:00Z"}}),
        &metas,
        &[true, false, false, true, false, false, false],
    );
    // Equality on dates is string equality.
    check(json!({"d": "2020-05-01T10:00:00Z"}), &metas, &[false, true, false, false, false, false, false]);
    check(json!({"d": {"$gt": "2020-01-01"}}), &[json!({"d": ["2019-01-01", "2021-01-01"]})], &[true]);
}

#[test]
fn filter_nested_paths() {
    let metas = [
        json!({"author": {"name": "Ada", "born": 1815}}),
        json!({"author": {"name": "Alan"}}),
        json!({"author": "Ada"}),
        json!({"author": [{"name": "Ada"}]}),
        json!({"author.name": "Ada"}),
    ];
    check(json!({"author.name": "Ada"}), &metas, &[true, false, false, false, false]);
    check(json!({"author.born": {"$lt": 1900}}), &metas, &[true, false, false, false, false]);
    check(json!({"author": {"$exists": true}}), &metas, &[true, true, true, true, false]);
    check(json!({"author.name": {"$exists": false}}), &metas, &[false, false, true, true, true]);
    check(json!({"author.name.first": {"$exists": true}}), &metas, &[false; 5]);
    let deep = [json!({"a": {"b": {"c": {"d": 1}}}})];
    check(json!({"a.b.c.d": 1, "a.b": {"$exists": true}}), &deep, &[true]);
}

#[test]
fn filter_logical_combinations() {
    let metas = [
        json!({"s": "wiki", "y": 2001}),
        json!({"s": "wiki", "y": 1990}),
        json!({"s": "news", "y": 2005}),
        json!({"s": "blog"}),
        Value::Null,
    ];
    check(json!({"s": "wiki", "y": {"$gte": 2000}}), &metas, &[true, false, false, false, false]);
    check(json!({"$or": [{"s": "news"}, {"y": {"$lt": 2000}}]}), &metas, &[false, true, true, false, false]);
    check(json!({"$and": [{"s": {"$ne": "blog"}}, {"$not": {"y": 2001}}]}), &metas, &[false, true, true, false, true]);
    check(
        json!({"$or": [{"$and": [{"s": "wiki"}, {"y": 1990}]}, {"$not": {"s": {"$exists": true}}}]}),
        &metas,
        &[false, true, false, false, true],
    );
    check(json!({"s": "wiki", "$or": [{"y": 2001}, {"y": 2005}]}), &metas, &[true, false, false, false, false]);
}

#[test]
fn filter_fields_and_columns() {
    let f = Filter::parse(&json!({"a": 1, "$or": [{"b.c": 2}, {"a": {"$gt": 0}}], "$not": {"d": null}})).unwrap();
    assert_eq!(f.fields().collect::<Vec<_>>(), ["a", "b.c", "d"]);
    let metas = [meta(json!({"a": {"b": [1, {"c": 2}]}, "x.y": 1, "": 2})), meta(json!({"z": null}))];
    let columns = MetaColumns::build(metas.iter().map(Some).chain([None]));
    assert_eq!(columns.len(), 3);
    assert!(columns.has_field("a") && columns.has_field("a.b") && columns.has_field("z"));
    assert!(!columns.has_field("a.b.c") && !columns.has_field("x.y") && !columns.has_field(""));
    let mut fields: Vec<&str> = columns.fields().collect();
    fields.sort_unstable();
    assert_eq!(fields, ["a", "a.b", "z"]);
    let all = Filter::parse(&json!({})).unwrap().select(&columns);
    assert_eq!((all.universe(), all.count(), all.iter().collect::<Vec<_>>()), (3, 3, vec![0, 1, 2]));
    assert!(!all.contains(3));
}

#[test]
fn filter_selection_words() {
    for len in [0, 1, 63, 64, 65, 130] {
        let all = Selection::all(len);
        assert_eq!(all.count(), len);
        assert_eq!(all.iter().collect::<Vec<_>>(), (0..len).collect::<Vec<_>>());
        assert_eq!(Selection::none(len).count(), 0);
        let metas = vec![None; len];
        let not = Filter::parse(&json!({"a": {"$ne": 1}})).unwrap().select(&MetaColumns::build(metas));
        assert_eq!(not, all);
    }
}

/// The synthetic index of `filter_select_100k`: passage i's meta, every tenth without.
fn synthetic(i: usize) -> Option<Meta> {
    (i % 10 != 9).then(|| {
        meta(json!({
            "year": 1990 + i % 40,
            "source": if i.is_multiple_of(3) { "wiki" } else { "news" },
            "tags": [format!("t{}", i % 7), "all"],
            "date": format!("2020-01-{:02}T12:00:00Z", 1 + i % 28),
            "meta": {"lang": if i.is_multiple_of(2) { "en" } else { "fr" }},
        }))
    })
}

#[test]
fn filter_select_100k() {
    const N: usize = 100_000;
    let metas: Vec<Option<Meta>> = (0..N).map(synthetic).collect();
    let columns = MetaColumns::build(metas.iter().map(Option::as_ref));
    assert_eq!(columns.len(), N);
    let has_meta = |i: usize| i % 10 != 9;
    let cases: [(Value, &dyn Fn(usize) -> bool); 4] = [
        (json!({"year": {"$gte": 2000, "$lt": 2010}, "source": "wiki"}), &|i| {
            has_meta(i) && (10..20).contains(&(i % 40)) && i % 3 == 0
        }),
        (json!({"tags": {"$nin": ["t1", "t2"]}}), &|i| !has_meta(i) || !matches!(i % 7, 1 | 2)),
        (json!({"date": {"$gte": "2020-01-10"}, "meta.lang": "fr"}), &|i| {
            has_meta(i) && 1 + i % 28 >= 10 && i % 2 == 1
        }),
        (json!({"$or": [{"year": 1990}, {"source": {"$exists": false}}]}), &|i| !has_meta(i) || i % 40 == 0),
    ];
    for (filter, expected) in cases {
        let parsed = Filter::parse(&filter).unwrap();
        let selection = parsed.select(&columns);
        let want = (0..N).filter(|&i| expected(i)).count();
        assert_eq!(selection.count(), want, "{filter}");
        assert_eq!(metas.iter().filter(|m| parsed.matches(m.as_ref())).count(), want, "{filter}");
        assert!(selection.iter().all(|i| parsed.matches(metas[i].as_ref())));
    }
}

/// A timing of the columnar evaluator on a million passages (no assertion on time):
/// `cargo test -p hoprag --lib filter_select_timing -- --ignored --nocapture`.
#[test]
#[ignore]
fn filter_select_timing() {
    const N: usize = 1_000_000;
    let metas: Vec<Option<Meta>> = (0..N).map(synthetic).collect();
    let start = std::time::Instant::now();
    let columns = MetaColumns::build(metas.iter().map(Option::as_ref));
    println!("build: {:?}", start.elapsed());
    for filter in [
        json!({"source": "wiki"}),
        json!({"year": {"$gte": 2000, "$lt": 2010}}),
        json!({"date": {"$gte": "2020-01-10"}}),
        json!({"tags": {"$in": ["t1", "t2", "t3"]}}),
        json!({"$or": [{"year": 1990}, {"$not": {"meta.lang": "en"}}]}),
    ] {
        let parsed = Filter::parse(&filter).unwrap();
        let mut best = std::time::Duration::MAX;
        let mut count = 0;
        for _ in 0..5 {
            let start = std::time::Instant::now();
            count = parsed.select(&columns).count();
            best = best.min(start.elapsed());
        }
        println!("{filter}: {count} in {best:?} (best of 5)");
    }
}

// ---- property: select == matches ----

fn scalar_value() -> impl Strategy<Value = Value> + Clone {
    prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        prop::sample::select(vec![json!(0), json!(1), json!(2), json!(-1), json!(2.5), json!(2.0), json!(-0.0)]),
        prop::sample::select(vec![
            "x",
            "y",
            "X",
            "2",
            "2020-01-01",
            "2020-01-01T00:00:00Z",
            "2020-01-01T01:00:00+01:00",
            "2021-06-30T12:00:00Z",
            "1999-12-31",
            "2020-01-01T00:00:00",
        ])
        .prop_map(|s| json!(s)),
    ]
}

fn meta_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        4 => scalar_value(),
        2 => prop::collection::vec(scalar_value(), 0..4).prop_map(Value::Array),
        1 => Just(json!([[1], {"c": 1}])),
    ];
    leaf.prop_recursive(2, 12, 3, |inner| {
        prop::collection::vec((prop::sample::select(vec!["c", "d", "x.y"]), inner), 0..3)
            .prop_map(|fields| Value::Object(fields.into_iter().map(|(k, v)| (k.to_string(), v)).collect()))
    })
}

fn random_meta() -> impl Strategy<Value = Option<Meta>> {
    prop::option::weighted(
        0.9,
        prop::collection::vec((prop::sample::select(vec!["a", "b", "c", "x.y", ""]), meta_value()), 0..4)
            .prop_map(|fields| fields.into_iter().map(|(k, v)| (k.to_string(), v)).collect::<Meta>()),
    )
}

fn condition() -> impl Strategy<Value = Value> {
    let scalars = prop::collection::vec(scalar_value(), 0..6);
    let bound = prop_oneof![
        prop::sample::select(vec![json!(0), json!(1.5), json!(2), json!(-1)]),
        prop::sample::select(vec!["2020-01-01", "2020-01-01T00:30:00Z", "2020-06-01T00:00:00+03:00"])
            .prop_map(|s| json!(s)),
    ];
    let op = prop_oneof![
        scalar_value().prop_map(|v| ("$eq", v)),
        scalar_value().prop_map(|v| ("$ne", v)),
        scalars.clone().prop_map(|v| ("$in", Value::Array(v))),
        scalars.prop_map(|v| ("$nin", Value::Array(v))),
        (prop::sample::select(vec!["$gt", "$gte", "$lt", "$lte"]), bound),
        any::<bool>().prop_map(|b| ("$exists", json!(b))),
    ];
    prop_oneof![
        scalar_value(),
        prop::collection::vec(op, 1..3)
            .prop_map(|ops| Value::Object(ops.into_iter().map(|(k, v)| (k.to_string(), v)).collect())),
    ]
}

fn random_filter() -> impl Strategy<Value = Value> {
    let path = prop::sample::select(vec!["a", "b", "c", "a.c", "a.d", "b.c", "a.c.d", "zz", "x", "x.y", "a.x.y"]);
    let leaf = prop::collection::vec((path, condition()), 0..3)
        .prop_map(|fields| Value::Object(fields.into_iter().map(|(k, v)| (k.to_string(), v)).collect()));
    leaf.prop_recursive(3, 24, 3, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 1..4).prop_map(|v| json!({"$and": v})),
            prop::collection::vec(inner.clone(), 1..4).prop_map(|v| json!({"$or": v})),
            inner.clone().prop_map(|v| json!({"$not": v})),
            (inner.clone(), inner).prop_map(|(a, b)| {
                let (Value::Object(mut a), Value::Object(b)) = (a, b) else { unreachable!() };
                a.extend(b);
                Value::Object(a)
            }),
        ]
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1000))]

    #[test]
    fn filter_select_equals_matches(
        metas in prop::collection::vec(random_meta(), 0..70),
        filter in random_filter(),
    ) {
        let parsed = Filter::parse(&filter).map_err(|e| TestCaseError::fail(format!("{filter}: {e}")))?;
        let columns = MetaColumns::build(metas.iter().map(Option::as_ref));
        let selection = parsed.select(&columns);
        prop_assert_eq!(selection.universe(), metas.len());
        let mut count = 0;
        for (i, meta) in metas.iter().enumerate() {
            let want = parsed.matches(meta.as_ref());
            count += usize::from(want);
            prop_assert_eq!(selection.contains(i), want, "passage {}: {:?} on {}", i, meta, filter);
        }
        prop_assert_eq!(selection.count(), count);
    }
}
