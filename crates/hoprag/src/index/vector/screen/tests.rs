use super::*;

/// Pseudo-random unit rows (xorshift), some exact duplicates to make ties.
fn unit_rows(n: usize, dim: usize, seed: u64) -> Matrix {
    let mut next = super::super::uniform_stream(seed);
    let mut m = Matrix::new(dim);
    for i in 0..n {
        let mut v: Vec<f32> = (0..dim).map(|_| next()).collect();
        if i % 50 == 7 {
            v = m.row(i as u32 - 1).to_vec();
        }
        crate::embed::l2_normalize(&mut v);
        m.push(&v);
    }
    m
}

/// The screen with and without its 4-bit first stage.
fn both_ways(m: &Matrix) -> [Screen; 2] {
    [Screen::with_first_stage(m, false), Screen::with_first_stage(m, true)]
}

#[test]
fn screening_finds_exactly_what_a_full_scan_finds() {
    // 100 dimensions: a partial lane, padded (and an odd number of int8 lanes, so half
    // of the last 4-bit lane is padding); 5001 rows: a partial group of four.
    for (rows, dim) in [(5000, 64), (5001, 100)] {
        let m = unit_rows(rows, dim, 42);
        for screen in both_ways(&m) {
            let stage = if screen.coarse.is_some() { "4-bit, int8" } else { "int8" };
            for q in 0..20u32 {
                // Queries near a row (a clear winner) and mixtures (a crowded top).
                let mut query = m.row(q * 97).to_vec();
                if q % 2 == 1 {
                    query.iter_mut().zip(m.row(q * 31 + 5)).for_each(|(a, b)| *a += b);
                    crate::embed::l2_normalize(&mut query);
                }
                for n in [1, 5, 64] {
                    let all = m.dots(&query);
                    let want = crate::rank::top(&all, n);
                    let got = screen.extremes(&m, &query, n);
                    assert_eq!(got.top, want, "{stage}: dim {dim}, query {q}, n {n}");
                    assert_eq!(got.min, all.iter().copied().reduce(f32::min), "{stage}");
                    assert_eq!(got.max, all.iter().copied().reduce(f32::max), "{stage}");
                    assert!(got.rescored < rows / 4, "{stage}: most rows should be ruled out: {}", got.rescored);
                }
            }
        }
    }
}

#[test]
fn screening_a_subset_of_rows_finds_exactly_what_scoring_them_finds() {
    let m = unit_rows(5001, 100, 9);
    let screen = Screen::with_first_stage(&m, true);
    // Subsets from one row to every row, the duplicates (ties) among them.
    for (share, q) in [(1usize, 0u32), (3, 1), (10, 2), (100, 3), (5001, 4)] {
        let rows: Vec<u32> = (0..m.rows() as u32).filter(|r| ((r * 7 + q) as usize).is_multiple_of(share)).collect();
        let mut query = m.row(q * 211 + 8).to_vec();
        query.iter_mut().zip(m.row(q * 13)).for_each(|(a, b)| *a += 0.5 * b);
        crate::embed::l2_normalize(&mut query);
        for n in [1, 10, 64, rows.len() + 5] {
            let mut want: Vec<(u32, f32)> = rows.iter().map(|&r| (r, exact::dot(m.row(r), &query))).collect();
            crate::rank::sort_hits(&mut want);
            want.truncate(n);
            let got = screen.top_of_rows(&m, &query, &rows, n).unwrap();
            assert_eq!(got, want, "every {share}th row, n {n}");
        }
    }
    assert!(screen.top_of_rows(&m, &[f32::NAN; 100], &[1, 2], 1).is_none());
}

#[test]
fn every_first_stage_bound_holds_and_its_probes_bound_the_extremes() {
    let m = unit_rows(3000, 100, 5);
    let screen = Screen::with_first_stage(&m, true);
    let coarse = screen.coarse.as_ref().unwrap();
    for q in 0..10u32 {
        let query: Vec<f32> = m.row(q * 13).iter().zip(m.row(q * 7 + 1)).map(|(a, b)| a - 0.5 * b).collect();
        let codes = QueryCodes::new(&query);
        let (first, ..) = coarse.intervals(&codes, 1);
        let all = m.dots(&query);
        for (r, &exact) in all.iter().enumerate() {
            let (lo, hi) = first[r];
            assert!(lo <= exact && exact <= hi, "row {r}: {exact} not in [{lo}, {hi}]");
        }
        for n in [1, 10] {
            let (_, probes) = coarse.intervals(&codes, n);
            assert_eq!(probes.len(), n + LOW_PROBES);
            let (floor, ceiling) = probe(&m, &query, &probes, n);
            let nth = crate::rank::top(&all, n)[n - 1].1;
            let min = all.iter().copied().fold(f32::INFINITY, f32::min);
            assert!(floor <= nth && floor > f32::NEG_INFINITY, "floor {floor}, n-th best {nth}");
            assert!(ceiling >= min && ceiling < f32::INFINITY, "ceiling {ceiling}, lowest {min}");
        }
    }
}

#[test]
fn nibble_dots_are_exact_at_the_extremes_and_match_the_portable_ones() {
    for (rows, dim) in [(1usize, 1usize), (1, 5), (4, 64), (7, 77), (9, 384), (5, 100)] {
        let stride = dim.div_ceil(2 * LANE);
        let code = |r: usize, i: usize| match (r + i) % 3 {
            0 => 7i8,
            1 => -7,
            _ => ((r * 31 + i * 37) % 15) as i8 - 7,
        };
        let (mut m, mut q) = (vec![Lane::default(); rows * stride], vec![Lane::default(); 2 * stride]);
        let qc: Vec<i8> = (0..dim).map(|i| if i % 2 == 0 { -127 } else { 127 }).collect();
        lanes(&qc, &mut q);
        let q_sum: i32 = qc.iter().map(|&c| c as i32).sum();
        let mut want = vec![0i32; rows];
        for r in 0..rows {
            let rc: Vec<i8> = (0..dim).map(|i| code(r, i)).collect();
            nibble_lanes(&rc, &mut m[r * stride..(r + 1) * stride]);
            want[r] = rc.iter().zip(&qc).map(|(&x, &y)| x as i32 * y as i32).sum();
        }
        let (mut got, mut portable) = (vec![0i32; rows], vec![0i32; rows]);
        nibble_dot_rows(&m, stride, &q, &mut got);
        nibble_dot_rows_portable(&m, stride, &q, &mut portable);
        let got: Vec<i32> = got.iter().map(|d| d - 8 * q_sum).collect();
        let portable: Vec<i32> = portable.iter().map(|d| d - 8 * q_sum).collect();
        assert_eq!(got, want, "{rows} rows of {dim}");
        assert_eq!(portable, want, "{rows} rows of {dim}");
    }
}

#[test]
fn a_large_matrix_gets_the_first_stage_and_a_small_one_does_not() {
    assert!(Screen::new(&unit_rows(100, 64, 3)).coarse.is_none());
    let rows = COARSE_FROM_BYTES / 64 + 1;
    assert!(Screen::new(&unit_rows(rows, 64, 3)).coarse.is_some());
}

/// The codes of a screen made after another are those a fresh screen gives, bit for
/// bit, in both stages: rows kept (moved to other positions), new and gone.
#[test]
fn a_screen_after_an_edit_is_a_fresh_screen() {
    let before = unit_rows(600, 100, 5);
    let new = unit_rows(80, 100, 6);
    let mut after = Matrix::new(100);
    for r in (0..600u32).rev().filter(|r| r % 9 != 0) {
        after.push(before.row(r));
        if r % 10 == 0 {
            after.push(new.row(r / 10));
        }
    }
    let old = Screen::build(&before, true, None);
    let from = same_rows(&after, &before);
    assert!(from.iter().filter(|f| f.is_some()).count() > 500 && from.iter().any(Option::is_none));
    let fresh = Screen::build(&after, true, None);
    let reused = Screen::build(&after, true, Some((&old, &from)));
    let bytes_of_norms = |n: &NormColumns| (0..n.len()).map(|r| format!("{:?}", n.get(r))).collect::<Vec<_>>();
    let bytes = |s: &Screen| {
        let norms = bytes_of_norms;
        let c = s.coarse.as_ref().expect("both stages");
        (
            s.codes.iter().map(|l| l.0).collect::<Vec<_>>(),
            norms(&s.norms),
            c.codes.iter().map(|l| l.0).collect::<Vec<_>>(),
            norms(&c.norms),
        )
    };
    assert!(bytes(&fresh) == bytes(&reused), "the reused screen differs from a fresh one");
    // (A matrix this small gets no coarse stage from `after`: the fine stages compared.)
    let fine = |s: &Screen| (s.codes.iter().map(|l| l.0).collect::<Vec<_>>(), bytes_of_norms(&s.norms));
    assert!(fine(&fresh) == fine(&Screen::after(&after, &old, &before, None)));
    assert!(fine(&fresh) == fine(&Screen::after(&after, &old, &before, Some(&from))));
}

#[test]
fn every_bound_holds_for_every_row() {
    let m = unit_rows(2000, 100, 7);
    let screen = Screen::new(&m);
    for q in 0..10u32 {
        let query: Vec<f32> = m.row(q * 13).iter().zip(m.row(q * 7 + 1)).map(|(a, b)| a - 0.5 * b).collect();
        let codes = QueryCodes::new(&query);
        let mut dots = vec![0i32; m.rows()];
        dot_rows(&screen.codes, screen.stride, &codes.lanes, &mut dots);
        for (r, exact) in m.dots(&query).into_iter().enumerate() {
            let (lo, hi) = codes.interval(dots[r], &screen.norms.get(r));
            assert!(lo <= exact && exact <= hi, "row {r}: {exact} not in [{lo}, {hi}]");
            // And the bound is far tighter than the scores it separates.
            assert!(hi - lo < 0.05, "row {r}: [{lo}, {hi}]");
        }
    }
}

#[test]
fn a_task_of_intervals_is_the_rows_intervals_bit_for_bit() {
    let mut m = unit_rows(exact::ROWS_PER_TASK + 37, 100, 13);
    let mut bad = m.row(3).to_vec();
    bad[5] = f32::NAN;
    m.push(&bad);
    bad[5] = f32::INFINITY;
    m.push(&bad);
    let screen = Screen::new(&m);
    let query: Vec<f32> = m.row(1).iter().zip(m.row(2)).map(|(a, b)| a - 0.25 * b).collect();
    let codes = QueryCodes::new(&query);
    let mut dots = vec![0i32; m.rows()];
    dot_rows(&screen.codes, screen.stride, &codes.lanes, &mut dots);
    let bits = |(lo, hi): (f32, f32)| (lo.to_bits(), hi.to_bits());
    for first in [0, exact::ROWS_PER_TASK] {
        let len = exact::ROWS_PER_TASK.min(m.rows() - first);
        for offset in [0, 3] {
            let mut out = vec![(0f32, 0f32); len];
            let shifted: Vec<i32> = dots[first..first + len].to_vec();
            codes.intervals(&shifted, offset, &screen.norms, first, &mut out);
            for (i, &got) in out.iter().enumerate() {
                let want = codes.interval(dots[first + i] - offset, &screen.norms.get(first + i));
                assert_eq!(bits(got), bits(want), "row {}", first + i);
            }
        }
    }
    let last = m.rows() - 2;
    assert_eq!(screen.all_intervals(&codes)[last..], [(f32::NEG_INFINITY, f32::INFINITY); 2], "rows not finite pass");
}

#[test]
fn intervals_hold_every_row_and_refuse_a_query_that_is_not_finite() {
    let m = unit_rows(3000, 100, 11);
    let screen = Screen::new(&m);
    let query = m.row(5).to_vec();
    let got = screen.intervals(&query).unwrap();
    for (r, exact) in m.dots(&query).into_iter().enumerate() {
        assert!(got[r].0 <= exact && exact <= got[r].1, "row {r}");
    }
    let mut bad = query.clone();
    bad[3] = f32::NAN;
    assert!(screen.intervals(&bad).is_none());
}

#[test]
fn integer_dots_are_exact_at_the_extremes_and_match_the_portable_ones() {
    for (rows, dim) in [(1usize, 1usize), (1, 5), (4, 32), (7, 77), (9, 384)] {
        let stride = dim.div_ceil(LANE);
        let code = |r: usize, i: usize| match (r + i) % 3 {
            0 => 127i8,
            1 => -127,
            _ => ((r * 31 + i * 37) % 255) as u8 as i8,
        };
        let (mut m, mut q) = (vec![Lane::default(); rows * stride], vec![Lane::default(); stride]);
        let qc: Vec<i8> = (0..dim).map(|i| if i % 2 == 0 { -127 } else { 127 }).collect();
        lanes(&qc, &mut q);
        let mut want = vec![0i32; rows];
        for r in 0..rows {
            let rc: Vec<i8> = (0..dim).map(|i| code(r, i).max(-127)).collect();
            lanes(&rc, &mut m[r * stride..(r + 1) * stride]);
            want[r] = rc.iter().zip(&qc).map(|(&x, &y)| x as i32 * y as i32).sum();
        }
        let (mut got, mut portable) = (vec![0i32; rows], vec![0i32; rows]);
        dot_rows(&m, stride, &q, &mut got);
        dot_rows_portable(&m, stride, &q, &mut portable);
        assert_eq!(got, want, "{rows} rows of {dim}");
        assert_eq!(portable, want, "{rows} rows of {dim}");
    }
}

#[test]
fn rows_that_are_not_finite_are_scored_exactly_and_never_displace_others() {
    let mut m = Matrix::new(2);
    m.push(&[f32::NAN, 1.0]);
    m.push(&[0.6, 0.8]);
    m.push(&[f32::INFINITY, 0.0]);
    m.push(&[0.8, 0.6]);
    for screen in both_ways(&m) {
        let got = screen.extremes(&m, &[1.0, 0.0], 1);
        assert_eq!(got.top, vec![(2, f32::INFINITY)]);
        let got = screen.extremes(&m, &[0.0, 1.0], 2);
        assert_eq!(got.top, vec![(1, 0.8), (3, 0.6)], "NaN scores are left out, as by an exact scan");
        assert_eq!(got.min, Some(0.6));
    }
}

#[test]
fn empty_zero_and_oversized_requests() {
    let m = Matrix::new(8);
    for screen in both_ways(&m) {
        let got = screen.extremes(&m, &[0.0; 8], 5);
        assert!(got.top.is_empty() && got.min.is_none());
    }
    let mut m = Matrix::new(2);
    m.push(&[0.0, 0.0]);
    m.push(&[0.6, 0.8]);
    for screen in both_ways(&m) {
        let got = screen.extremes(&m, &[1.0, 0.0], 10);
        assert_eq!(got.top, vec![(1, 0.6), (0, 0.0)]);
        assert_eq!((got.min, got.max), (Some(0.0), Some(0.6)));
        let got = screen.extremes(&m, &[0.0, 0.0], 1);
        assert_eq!((got.min, got.max), (Some(0.0), Some(0.0)), "a zero query scores every row 0");
    }
}
