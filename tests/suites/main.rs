//! The library's integration suites in one test binary: topology, collectives, TEN, the
//! validator, simulator and lower bounds, the greedy and ILP synthesizers, the baselines, the
//! shared conformance suite and the property tests. Run alone with `cargo test --test suites`.

mod common;

mod alltoall;
mod baselines;
mod bounds;
mod bucket_bidir;
mod chakra;
mod chakra_replay;
mod collective;
mod compact;
mod conformance;
mod failures;
mod greedy;
mod ilp;
mod latency;
mod link_order;
mod mirror;
mod msccl;
mod msccl_replay;
mod mscclpp;
mod mscclpp_replay;
mod packing;
mod pictures;
mod pipeline;
mod portfolio;
mod rails;
mod random_schedules;
mod reference;
mod rounds;
mod sim;
mod slow_links;
mod ten;
mod tidy;
mod topology;
mod translate;
mod trees;
mod validate;
