//! The figures of one mode, as JSON (one object per mode) and as a table.

use serde::Serialize;

use super::check::Check;

/// End-to-end latency percentiles in milliseconds.
#[derive(Debug, Clone, Copy, Default, Serialize)]
pub struct Percentiles {
    pub p50: f64,
    pub p90: f64,
    pub p99: f64,
    pub max: f64,
}

impl Percentiles {
    /// Nearest-rank percentiles of microsecond samples.
    pub fn of(mut samples_us: Vec<u64>) -> Self {
        if samples_us.is_empty() {
            return Self::default();
        }
        samples_us.sort_unstable();
        let n = samples_us.len();
        let at = |p: f64| {
            let rank = ((p / 100.0) * n as f64).ceil() as usize;
            samples_us[rank.clamp(1, n) - 1] as f64 / 1000.0
        };
        Self {
            p50: at(50.0),
            p90: at(90.0),
            p99: at(99.0),
            max: samples_us[n - 1] as f64 / 1000.0,
        }
    }
}

/// One mode's report.
#[derive(Debug, Clone, Default, Serialize)]
pub struct ModeReport {
    pub mode: &'static str,
    /// `sqlite`, `postgres`, or `none` for the floor.
    pub database: &'static str,
    pub conversations: usize,
    /// Server processes on the one database, behind the bench's
    /// round-robin (1 for the floor).
    pub instances: usize,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub concurrency: Option<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rate: Option<f64>,
    /// Clicks asked for in the measured phase.
    pub clicks: u64,
    pub accepted: u64,
    pub delivered: u64,
    pub errors: u64,
    /// No loss, no duplicate, each conversation's events in click order
    /// (`lost`, `duplicates`, `out_of_order`, `unmatched`).
    #[serde(flatten)]
    pub check: Check,
    /// The check passed and every click was accepted.
    pub consistent: bool,
    pub accepted_per_s: f64,
    /// Deliveries per second, first to last arrival at the receiver (in
    /// the backlog mode: the drain after the receiver came back).
    pub delivered_per_s: f64,
    pub e2e_ms: Percentiles,
    /// Click sent (or scheduled) → its answer: the part of `e2e_ms` before
    /// the delivery.
    pub accept_ms: Percentiles,
    /// The mean of the floor runs' throughputs.
    pub floor_per_s: f64,
    /// Each floor run's min(accepted_per_s, delivered_per_s): before the
    /// blockhook modes, and after the closed loop when it ran.
    pub floor_runs_per_s: Vec<f64>,
    /// min(accepted_per_s, delivered_per_s) over `floor_per_s`.
    pub floor_ratio: f64,
    /// CPU of the server processes, summed over the instances.
    pub server_cpu_s: f64,
    pub server_cpu_us_per_click: f64,
    /// Peak RSS, summed over the instances.
    pub server_peak_rss_mb: f64,
    /// CPU of the bench process itself (load generator and receiver).
    pub bench_cpu_s: f64,
    /// CPU of the PostgreSQL server's processes, when it is the database.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub database_cpu_s: Option<f64>,
    pub elapsed_s: f64,
    pub load_average: f64,
    /// Backlog: server RSS once every click was accepted, receiver down.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub backlog_rss_mb: Option<f64>,
    /// Backlog: receiver back up → first delivery.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub resume_s: Option<f64>,
    /// Backlog: drain rate over the closed loop's delivered rate.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub drain_vs_closed: Option<f64>,
    /// Conversations preloaded into the store before the server started.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub preload: Option<u64>,
    /// Seconds the preload took.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub preload_s: Option<f64>,
    /// Purge: conversations deleted per second by the retention purge.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub purge_per_s: Option<f64>,
    /// Purge: how long the pass took (from the server's log).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub purge_s: Option<f64>,
    /// Purge: the share of the open loop's sending time the purge ran in.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub purge_overlap: Option<f64>,
    /// Three-endpoint mode: endpoints per chatbot, and whether every
    /// matching delivery to the two extra ones was made.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub endpoints: Option<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub endpoints_made: Option<bool>,
    /// Three-endpoint mode: how long after the default endpoint's last
    /// delivery the two extra ones had all theirs, in seconds.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub endpoints_lag_s: Option<f64>,
    /// Three-endpoint mode: the server's CPU per accepted click until the
    /// extra endpoints' last delivery (the figure `server_cpu_us_per_click`
    /// stops at the default endpoint's last), and PostgreSQL's as well.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub endpoints_cpu_us_per_click: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub endpoints_database_cpu_us_per_click: Option<f64>,
    /// Three-endpoint mode: the machine's CPU per click (the bench's, the
    /// servers' and PostgreSQL's) that the two extra receivers' sends cost
    /// the floor forwarder (`floor_3ep` against `floor`): the extra
    /// deliveries' HTTP alone, nothing stored.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub extra_sends_us_per_click: Option<f64>,
    /// Three-endpoint mode: the share of the one-endpoint rate it would
    /// reach if its extra deliveries cost only their sends, at the same
    /// busy cores: one-endpoint machine CPU per click over that plus
    /// `extra_sends_us_per_click`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sends_only_share: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub first_error: Option<String>,
}

impl ModeReport {
    /// The throughput compared with the floor.
    pub fn throughput(&self) -> f64 {
        self.accepted_per_s.min(self.delivered_per_s)
    }

    /// The machine's CPU per accepted click over the measured run: the
    /// servers', the bench's (load and receivers) and PostgreSQL's.
    pub fn machine_us_per_click(&self) -> f64 {
        let cpu = self.server_cpu_s + self.bench_cpu_s + self.database_cpu_s.unwrap_or(0.0);
        cpu * 1e6 / self.accepted.max(1) as f64
    }

    /// The machine's cores busy on average over the measured run.
    pub fn busy_cores(&self) -> f64 {
        let cpu = self.server_cpu_s + self.bench_cpu_s + self.database_cpu_s.unwrap_or(0.0);
        cpu / self.elapsed_s.max(1e-9)
    }

    /// Every click accepted, and delivered once and in order.
    pub fn consistent(&self) -> bool {
        self.errors == 0
            && self.check.passed()
            && self.delivered == self.accepted
            && self.endpoints_made != Some(false)
    }

    pub fn set_floor(&mut self, floor_per_s: f64, runs: &[f64]) {
        self.floor_per_s = floor_per_s;
        self.floor_runs_per_s = runs.to_vec();
        self.floor_ratio = if floor_per_s > 0.0 {
            self.throughput() / floor_per_s
        } else {
            0.0
        };
    }
}

/// The share of the floor, except for the open loop, whose rate is set.
fn floor_share(r: &ModeReport) -> String {
    if r.rate.is_some() {
        "-".into()
    } else {
        format!("{:.0}%", r.floor_ratio * 100.0)
    }
}

/// The table for people.
pub fn table(reports: &[ModeReport]) -> String {
    let mut s = format!(
        "{:<11} {:>4} {:>8} {:>9} {:>11} {:>12} {:>7} {:>7} {:>7} {:>8} {:>6} {:>7} {:>8} {:>8}\n",
        "mode",
        "inst",
        "clicks",
        "load",
        "accepted/s",
        "delivered/s",
        "p50 ms",
        "p90 ms",
        "p99 ms",
        "max ms",
        "floor",
        "cpu s",
        "µs/click",
        "peak MB"
    );
    for r in reports {
        let load = match (r.concurrency, r.rate) {
            (_, Some(rate)) => format!("{rate:.0}/s"),
            (Some(c), None) => format!("c={c}"),
            _ => String::new(),
        };
        s.push_str(&format!(
            "{:<11} {:>4} {:>8} {:>9} {:>11.0} {:>12.0} {:>7.2} {:>7.2} {:>7.2} {:>8.1} {:>6} {:>7.2} {:>8.1} {:>8.1}\n",
            r.mode,
            r.instances,
            r.accepted,
            load,
            r.accepted_per_s,
            r.delivered_per_s,
            r.e2e_ms.p50,
            r.e2e_ms.p90,
            r.e2e_ms.p99,
            r.e2e_ms.max,
            floor_share(r),
            r.server_cpu_s,
            r.server_cpu_us_per_click,
            r.server_peak_rss_mb,
        ));
    }
    if let Some(r) = reports.first()
        && r.floor_runs_per_s.len() > 1
    {
        let runs: Vec<String> = r
            .floor_runs_per_s
            .iter()
            .map(|x| format!("{x:.0}/s"))
            .collect();
        s.push_str(&format!(
            "floor: {} (before and after the closed loop); shares are of their mean, {:.0}/s\n",
            runs.join(" and "),
            r.floor_per_s
        ));
    }
    for r in reports {
        let name = if r.instances > 1 {
            format!("{} ×{}", r.mode, r.instances)
        } else {
            r.mode.to_string()
        };
        if !r.mode.starts_with("floor") {
            s.push_str(&format!(
                "{name}: check {}: {}\n",
                if r.check.passed() { "passed" } else { "FAILED" },
                r.check.describe()
            ));
            s.push_str(&format!(
                "{name}: clicks answered in p50 {:.2} / p90 {:.2} / p99 {:.2} ms (the rest of e2e is the delivery)\n",
                r.accept_ms.p50, r.accept_ms.p90, r.accept_ms.p99
            ));
            if r.mode.starts_with("closed") {
                s.push_str(&format!(
                    "{name}: the machine (server, bench and database) used {:.1} µs of CPU per click, {:.2} cores busy\n",
                    r.machine_us_per_click(),
                    r.busy_cores()
                ));
            }
            if let (Some(n), Some(made)) = (r.endpoints, r.endpoints_made) {
                s.push_str(&format!(
                    "{name}: {n} endpoints; every matching delivery to the other two made: {}{}\n",
                    if made { "yes" } else { "NO" },
                    r.endpoints_lag_s
                        .map(|l| format!(", {l:.2} s after the default endpoint's last"))
                        .unwrap_or_default()
                ));
            }
            if let (Some(x), Some(share)) = (r.extra_sends_us_per_click, r.sends_only_share) {
                s.push_str(&format!(
                    "{name}: the extra sends alone cost the machine {x:.1} µs/click (floor_3ep against floor); \
                     with no other cost, {} endpoints would reach {:.0}% of 1 at the same busy cores\n",
                    r.endpoints.unwrap_or(3),
                    share * 100.0
                ));
            }
            if let Some(us) = r.endpoints_cpu_us_per_click {
                s.push_str(&format!(
                    "{name}: server CPU until every endpoint's last delivery: {us:.1} µs/click{}\n",
                    r.endpoints_database_cpu_us_per_click
                        .map(|db| format!(", PostgreSQL {db:.1} µs/click"))
                        .unwrap_or_default()
                ));
            }
        }
        if let Some(db) = r.database_cpu_s {
            s.push_str(&format!(
                "{name}: PostgreSQL used {db:.2} s of CPU besides ({:.1} µs/click)\n",
                db * 1e6 / r.accepted.max(1) as f64
            ));
        }
        if let (Some(rss), Some(resume)) = (r.backlog_rss_mb, r.resume_s) {
            s.push_str(&format!(
                "{name}: RSS {rss:.1} MB with {} clicks queued; first delivery {resume:.2} s after the receiver came back; drain {:.0}/s",
                r.accepted, r.delivered_per_s
            ));
            if let Some(x) = r.drain_vs_closed {
                s.push_str(&format!(" = {:.0}% of the closed loop", x * 100.0));
            }
            s.push('\n');
        }
        if let (Some(rss), None, "held") = (r.backlog_rss_mb, r.resume_s, r.mode) {
            s.push_str(&format!(
                "{name}: RSS {rss:.1} MB with {} deliveries held for a paused endpoint\n",
                r.accepted
            ));
        }
        if let (Some(n), Some(t)) = (r.preload, r.preload_s) {
            s.push_str(&format!(
                "{}: store preloaded with {n} conversations in {t:.1} s\n",
                r.mode
            ));
        }
        if let (Some(rate), Some(t), Some(o)) = (r.purge_per_s, r.purge_s, r.purge_overlap) {
            s.push_str(&format!(
                "purge: {rate:.0} conversations/s ({t:.1} s); it ran during {:.0}% of the open loop's sending\n",
                o * 100.0
            ));
        }
        if !r.consistent() {
            s.push_str(&format!(
                "{name}: {} accepted, {} delivered, {} errors, {} unmatched{}\n",
                r.accepted,
                r.delivered,
                r.errors,
                r.check.unmatched,
                r.first_error
                    .as_deref()
                    .map(|e| format!(" (first error: {e})"))
                    .unwrap_or_default()
            ));
        }
    }
    s
}

/// Each three-endpoint run's extra sends' cost on the floor, and the
/// share of its one-endpoint run's rate it would reach were that its whole
/// extra cost (same instances, same busy cores).
pub fn sends_only_share(reports: &mut [ModeReport]) {
    let of = |mode: &str, instances: usize| {
        reports
            .iter()
            .find(|r| r.mode == mode && r.instances == instances)
            .map(ModeReport::machine_us_per_click)
    };
    let (Some(floor), Some(fan)) = (of("floor", 1), of("floor_3ep", 1)) else {
        return;
    };
    let extra = (fan - floor).max(0.0);
    let one: Vec<Option<f64>> = reports.iter().map(|r| of("closed", r.instances)).collect();
    for (r, one) in reports.iter_mut().zip(one) {
        if let (Some(one), "closed_3ep") = (one, r.mode) {
            r.extra_sends_us_per_click = Some(extra);
            r.sends_only_share = Some(one / (one + extra));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(mode: &'static str, server: f64, bench: f64) -> ModeReport {
        ModeReport {
            mode,
            instances: 1,
            accepted: 1_000,
            server_cpu_s: server,
            bench_cpu_s: bench,
            ..ModeReport::default()
        }
    }

    #[test]
    fn the_sends_only_share_adds_the_floors_extra_cost_to_one_endpoints() {
        // floor 100 µs, floor_3ep 150 µs: the sends cost 50 µs a click;
        // one endpoint 200 µs a click: 200 / 250.
        let mut r = vec![
            run("floor", 0.05, 0.05),
            run("floor_3ep", 0.1, 0.05),
            run("closed", 0.15, 0.05),
            run("closed_3ep", 0.3, 0.1),
        ];
        sends_only_share(&mut r);
        assert!((r[3].extra_sends_us_per_click.unwrap_or(0.0) - 50.0).abs() < 1e-6);
        assert!((r[3].sends_only_share.unwrap_or(0.0) - 0.8).abs() < 1e-9);
        assert_eq!(r[2].sends_only_share, None);
    }

    #[test]
    fn nearest_rank_percentiles() {
        let p = Percentiles::of((1..=100).map(|ms| ms * 1000).collect());
        assert_eq!((p.p50, p.p90, p.p99, p.max), (50.0, 90.0, 99.0, 100.0));
        let one = Percentiles::of(vec![1500]);
        assert_eq!((one.p50, one.max), (1.5, 1.5));
        assert_eq!(Percentiles::of(Vec::new()).max, 0.0);
    }
}
