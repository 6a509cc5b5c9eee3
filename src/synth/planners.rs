//! The planners of one phase's chunk movement on a TEN, each answering a `phase::Problem` with a
//! `phase::Plan`: the TACOS matcher (`matcher`) and its entry points (`entries`, one per manner
//! the greedy runs it in), the integer program (`ilp`), the latency mode's rounds (`flood`) and
//! one pattern translated over a torus (`translate`).

pub mod entries;
pub mod flood;
pub mod ilp;
pub mod matcher;
pub mod translate;
