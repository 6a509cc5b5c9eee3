//! The model as CPLEX LP text with readable names (for `--dump-lp`).

use super::model::{Col, Family, Goal, Model};
use crate::ten::Ten;
use std::fmt::Write as _;

impl Model {
    /// The model in CPLEX LP format, with readable names.
    pub(super) fn lp_text(&self, ten: &Ten, horizon: u32, goal: Goal) -> String {
        let name = |i: u32| -> String {
            match self.cols[i as usize] {
                Col::Sent { c, e, t } => {
                    let edge = &ten.edges[e as usize];
                    format!("sent_c{c}_{}to{}_e{e}_t{t}", edge.src, edge.dst)
                }
                Col::Hold { c, n, t } => format!("hold_c{c}_n{n}_t{t}"),
            }
        };
        let mut s = String::new();
        let _ = writeln!(s, "\\ ccsynth ILP ({}): horizon {horizon} timesteps", goal.name());
        let _ = writeln!(s, "\\ {} variables, {} constraints", self.cols.len(), self.rows.len());
        s.push_str("Maximize\n obj:");
        let mut terms = 0;
        for (i, &w) in self.obj.iter().enumerate() {
            if w != 0.0 {
                let _ = write!(s, " + {w} {}", name(i as u32));
                terms += 1;
                if terms % 6 == 0 {
                    s.push_str("\n ");
                }
            }
        }
        if terms == 0 {
            s.push_str(" 0 ");
            if let Some(i) = (0..self.cols.len()).next() {
                let _ = write!(s, "{}", name(i as u32));
            }
        }
        s.push_str("\nSubject To\n");
        for row in &self.rows {
            let label = match row.family {
                Family::Holding { c, n, t } => format!("holding_c{c}_n{n}_t{t}"),
                Family::Consistency { c, e, t } => format!("consistency_c{c}_e{e}_t{t}"),
                Family::Congestion { r, t } => format!("congestion_r{r}_t{t}"),
                Family::Post { c, n } => format!("post_c{c}_n{n}"),
            };
            let _ = write!(s, " {label}:");
            for (k, &(c, coef)) in row.terms.iter().enumerate() {
                let sign = if coef < 0.0 { '-' } else { '+' };
                let mag = coef.abs();
                if mag == 1.0 {
                    let _ = write!(s, " {sign} {}", name(c));
                } else {
                    let _ = write!(s, " {sign} {mag} {}", name(c));
                }
                if k % 6 == 5 {
                    s.push_str("\n   ");
                }
            }
            if row.lo == row.hi {
                let _ = writeln!(s, " = {}", row.lo);
            } else if row.lo == f64::NEG_INFINITY {
                let _ = writeln!(s, " <= {}", row.hi);
            } else {
                let _ = writeln!(s, " >= {}", row.lo);
            }
        }
        s.push_str("Binary\n");
        for i in 0..self.cols.len() {
            let _ = writeln!(s, " {}", name(i as u32));
        }
        s.push_str("End\n");
        s
    }
}
