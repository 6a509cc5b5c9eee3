//! The binary and the HTTP service, black-box: the CLI as scripts use it (`cli`, through the
//! real `ccsynth` executable; its output formats in `cli_export`, `bench` in `cli_bench`,
//! `serve` and the container in `cli_serve`, the ILP's reports in `cli_ilp`) and the service over real TCP on SQLite and PostgreSQL (`api`).
//! `doors` drives the CLI, the API and the bench with one table of requests; `hygiene` holds
//! the service's lesser bounds (strict JSON, hosts, tokens, quotas, answers at shutdown);
//! `durability` the server killed, stopped and replicated; `disk_faults` its disk full or read-only;
//! `harness` what they all share. Run alone with `cargo test --test service`.

mod harness;

mod api;
mod cli;
mod cli_bench;
mod cli_export;
mod cli_ilp;
mod cli_serve;
mod disk_faults;
mod doors;
mod durability;
mod hygiene;
