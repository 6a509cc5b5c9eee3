//! Tests of the transfers' columns: what is pushed comes back, lists and routes stored once.
use super::*;

fn sample() -> Vec<Transfer> {
    vec![
        Transfer::copy(0, 0, 1, [3]),
        Transfer::reduce(1, 1, 2, vec![0, 1, 2]),
        Transfer::copy(1, 0, 2, [4]).via([0u32, 5, 2]),
        Transfer::copy(2, 2, 2, [1]).into_slots(vec![7]),
        Transfer::copy(2, 0, 2, vec![]).via([0u32, 5, 2]),
        Transfer::reduce(3, 4, 3, vec![6, 6]).into_slots(vec![6, 9]).via([4u32, 3]),
    ]
}

#[test]
fn columns_give_back_what_was_pushed() {
    let v = sample();
    let t: Transfers = v.clone().into();
    assert_eq!(t.len(), v.len());
    assert_eq!(t.to_vec(), v);
    for (i, x) in v.iter().enumerate() {
        assert_eq!(t.at(i), x.as_ref(), "transfer {i}");
    }
    // A list carried twice is stored once, a range or not, shared or parsed twice; lists
    // of the same chunks in another order are other lists.
    let mut r = Transfers::new();
    r.push(Transfer::copy(0, 0, 1, vec![4, 5, 6]));
    r.push(Transfer::copy(1, 1, 2, vec![4, 5, 6]));
    r.push(Transfer::copy(1, 1, 2, vec![6, 5, 4]));
    r.push(Transfer::copy(2, 1, 2, vec![4, 5]));
    r.push(Transfer::copy(3, 2, 1, vec![6, 5, 4]));
    r.push(Transfer::copy(3, 2, 1, vec![6, 4, 5]));
    r.push(Transfer::copy(4, 0, 1, vec![]));
    r.push(Transfer::copy(4, 1, 0, vec![]));
    assert_eq!(r.lists.len(), 5);
    assert_eq!(r.list_entries(), 3 + 3 + 2 + 3);
    assert_eq!(r.list_index(2), r.list_index(4));
    assert_eq!(r.list_index(6), r.list_index(7));
    assert_eq!(r.at(1).chunks, &[4, 5, 6]);
    assert_eq!(r.at(2).chunks, &[6, 5, 4]);
    assert_eq!(r.at(3).chunks, &[4, 5]);
    assert_eq!(r.at(4).chunks, &[6, 5, 4]);
    assert_eq!(r.at(5).chunks, &[6, 4, 5]);
    assert_eq!(r.at(7).chunks, &[] as &[u32]);
    // One route pushed twice by the same pointer is stored once.
    let shared: Route = vec![0u32, 5, 2].into();
    let mut u = Transfers::new();
    u.push(Transfer::copy(0, 0, 2, [1]).via(shared.clone()));
    u.push(Transfer::copy(1, 0, 2, [2]).via(shared));
    u.push(Transfer::copy(2, 0, 1, [2]));
    assert_eq!(u.routes.len(), 1);
    assert_eq!(u.at(2).path, None);
    assert_eq!(u.at(1).path_nodes(), Some(&[0u32, 5, 2][..]));
}

#[test]
fn json_is_the_array_of_transfer_rows_and_reads_objects_too() {
    let v = sample();
    let t: Transfers = v.clone().into();
    // Rows, except where a transfer writes other slots (an object, as `Transfer` writes it).
    let rows = serde_json::to_value(&t).unwrap();
    let objects = serde_json::to_value(&v).unwrap();
    for (i, (row, obj)) in rows.as_array().unwrap().iter().zip(objects.as_array().unwrap()).enumerate() {
        if v[i].dst_chunks.is_some() {
            assert_eq!(row, obj);
            continue;
        }
        let mut want = vec![obj["step"].clone(), obj["src"].clone(), obj["dst"].clone(), obj["chunks"].clone()];
        want.push(obj["op"].clone());
        want.extend(obj.get("path").cloned());
        assert_eq!(row, &serde_json::Value::Array(want), "transfer {i}");
    }
    let a = serde_json::to_string(&t).unwrap();
    let back: Transfers = serde_json::from_str(&a).unwrap();
    assert_eq!(back, t);
    let back: Transfers = serde_json::from_str(&serde_json::to_string(&v).unwrap()).unwrap();
    assert_eq!(back, t);
}

#[test]
fn edits_and_setters_change_one_transfer() {
    let mut t: Transfers = sample().into();
    t.set_step(0, 9);
    t.set_op(0, Op::Reduce);
    t.set_op(1, Op::Copy);
    assert_eq!((t.at(0).step, t.at(0).op, t.at(1).op), (9, Op::Reduce, Op::Copy));
    t.edit(|v| v.swap(0, 5));
    assert_eq!(t.at(5).step, 9);
    assert_eq!(t.at(0).dst_chunks, Some(&[6u32, 9][..]));
    let p = t.permuted(&[5, 0]);
    assert_eq!(p.to_vec(), vec![t.at(5).to_owned(), t.at(0).to_owned()]);
}

#[test]
fn a_single_chunk_transfer_takes_17_bytes() {
    let mut t = Transfers::new();
    for i in 0..1000u32 {
        t.push(Transfer::copy(i, 0, 1, [i]));
    }
    t.step.shrink_to_fit();
    t.src.shrink_to_fit();
    t.dst.shrink_to_fit();
    t.chunk.shrink_to_fit();
    t.flags.shrink_to_fit();
    assert_eq!(t.heap_bytes(), 17 * 1000);
}

#[test]
fn the_dominant_spacing_is_the_spacing_of_the_most_carried_chunks() {
    let mut ts = Transfers::new();
    assert_eq!(ts.dominant_spacing(), 1);
    // Two messages of every fourth chunk (8 entries), one of consecutive chunks (3).
    ts.push(Transfer::copy(0, 0, 1, vec![0, 4, 8, 12]));
    ts.push(Transfer::copy(1, 1, 2, vec![0, 4, 8, 12]));
    ts.push(Transfer::copy(0, 1, 0, vec![1, 2, 3]));
    assert_eq!(ts.dominant_spacing(), 4);
    // Uneven lists count for the chunks' own order.
    for i in 0..3 {
        ts.push(Transfer::copy(2 + i, 2, 3, vec![5, 1, 9, 3]));
    }
    assert_eq!(ts.dominant_spacing(), 1);
    assert_eq!(ts.list_index(0), ts.list_index(1));
    assert_eq!(ts.list_index(3), ts.list_index(5));
    assert_eq!(ts.lists().len(), 3);
}

#[test]
fn a_progression_is_told_from_a_list_that_breaks_it_anywhere() {
    let run: Vec<u32> = (0..100).map(|i| 7 + 3 * i).collect();
    assert!(is_progression(&run, 3));
    assert!(!is_progression(&run, 2));
    // Broken at the first, the last, and a block's edge (entries 31 and 32).
    for at in [1, 31, 32, 33, 99] {
        let mut bad = run.clone();
        bad[at] += 1;
        assert!(!is_progression(&bad, 3), "broken at {at}");
    }
    // Wrapping past 2^32 is still a progression, as the lists' spacing always wrapped.
    assert!(is_progression(&[u32::MAX - 1, 0, 2], 2));
    assert!(is_progression(&[5], 0));
}

/// Random transfers: a list (a range, a shared uneven one, one chunk), maybe a path, maybe
/// destination slots.
fn random_transfers() -> impl Strategy<Value = Vec<Transfer>> {
    proptest::collection::vec((0u32..4, 0u32..5, 0u32..5, 0u32..4, 0u32..3, any::<bool>()), 0..40).prop_map(|raw| {
        let uneven: ChunkList = vec![5u32, 1, 9].into();
        raw.into_iter()
            .map(|(step, a, b, list, extra, routed)| {
                let chunks: ChunkList = match list {
                    0 => ChunkList::One(a),
                    1 => (0..4).map(|i| b + 2 * i).collect::<Vec<u32>>().into(),
                    2 => uneven.clone(),
                    _ => ChunkList::Many(std::sync::Arc::new(Vec::new())),
                };
                let mut t = Transfer { step, ..Transfer::copy(step, a as usize, b as usize, chunks.clone()) };
                if routed {
                    t = t.via([a, 10 + extra, b]);
                }
                if extra == 2 && !chunks.is_empty() {
                    let slots: Vec<u32> = chunks.iter().map(|&c| c + 20).collect();
                    t = t.into_slots(slots);
                }
                t
            })
            .collect()
    })
}

use proptest::prelude::*;

proptest! {
    #[test]
    fn a_permutation_keeps_every_transfer_as_it_was(v in random_transfers(), seed in any::<u64>()) {
        let t: Transfers = v.clone().into();
        let mut order: Vec<u32> = (0..v.len() as u32).collect();
        let mut rng = crate::rng::Rng::new(seed);
        rng.shuffle(&mut order);
        let p = t.permuted(&order);
        let want: Vec<Transfer> = order.iter().map(|&i| v[i as usize].clone()).collect();
        prop_assert_eq!(p.to_vec(), want.clone());
        // And the same columns as pushing them one by one.
        let pushed: Transfers = want.into();
        prop_assert_eq!(serde_json::to_string(&p).unwrap(), serde_json::to_string(&pushed).unwrap());
        // A subset too.
        let half = &order[..order.len() / 2];
        prop_assert_eq!(t.permuted(half).to_vec(), half.iter().map(|&i| v[i as usize].clone()).collect::<Vec<_>>());
    }

    #[test]
    fn the_written_array_is_each_transfer_written_alone(v in random_transfers()) {
        // The array writer cuts each shared list into items once; a transfer written alone
        // cuts its own.
        let t: Transfers = v.clone().into();
        let alone: Vec<String> = t.iter().map(|r| serde_json::to_string(&r).unwrap()).collect();
        prop_assert_eq!(serde_json::to_string(&t).unwrap(), format!("[{}]", alone.join(",")));
    }
}
