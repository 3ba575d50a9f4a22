//! `scopeprof inspect`'s list of the worst scheduled delays: the task polls that waited longest
//! between the wake that made their task runnable and their start (Tokio's own
//! instrumentation, `/scope_profiler_rs/polls/scheduled_ns`). Streams the polls, keeping the
//! worst few.

use scope_profiler::read::{Profile, ReadError};

/// How many delays the list shows.
const WORST: usize = 10;

/// One delay: (scheduled ns, poll start ns, task index, thread index).
type Delay = (i64, i64, i64, i64);

/// Keeps `d` in `worst` (longest first, at most [`WORST`]) if it is among the worst.
fn keep(worst: &mut Vec<Delay>, d: Delay) {
    if worst.len() == WORST && worst[WORST - 1].0 >= d.0 {
        return;
    }
    let at = worst.partition_point(|w| w.0 >= d.0);
    worst.insert(at, d);
    worst.truncate(WORST);
}

/// The list (ends with a newline), or "" when the file has no scheduled time; `tick` is
/// called after every batch of polls read (the reading child's heartbeat).
pub(crate) fn worst(p: &Profile, tick: &mut dyn FnMut()) -> Result<String, ReadError> {
    let mut worst: Vec<Delay> = Vec::with_capacity(WORST + 1);
    p.for_each_poll(1 << 16, |polls| {
        tick();
        for q in polls.iter().filter(|q| q.scheduled_ns > 0 && q.task >= 0) {
            keep(&mut worst, (q.scheduled_ns, q.start_ns, q.task, q.thread));
        }
        Ok(())
    })?;
    if worst.is_empty() {
        return Ok(String::new());
    }
    let origin = p.start_time_ns().unwrap_or(0);
    let task_name = |i: i64| {
        p.tasks()
            .iter()
            .find(|t| t.rank == 0 && t.index == i)
            .map_or_else(|| format!("task #{i}"), |t| t.name.clone())
    };
    let thread_name = |i: i64| {
        p.threads()
            .iter()
            .find(|t| t.rank == 0 && t.index == i)
            .map_or_else(|| format!("thread {i}"), |t| t.name.clone())
    };
    let mut out = String::from(
        "\n  Worst scheduled delays (a task woken, waiting for a worker, before a poll):\n\
         \x20   scheduled [s]        at [s]   task (thread of the poll)\n",
    );
    for (sched, start, task, thread) in worst {
        out += &format!(
            "    {:>13.6} {:>13.6}   {} ({})\n",
            sched as f64 / 1e9,
            (start - sched - origin) as f64 / 1e9,
            task_name(task),
            thread_name(thread)
        );
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_worst_are_kept_longest_first() {
        let mut worst = Vec::new();
        for (k, d) in [5, 1, 9, 3, 7, 9, 2, 8, 6, 4, 10, 0, 11]
            .into_iter()
            .enumerate()
        {
            keep(&mut worst, (d, k as i64, 0, 0));
        }
        let kept: Vec<i64> = worst.iter().map(|w| w.0).collect();
        assert_eq!(kept, [11, 10, 9, 9, 8, 7, 6, 5, 4, 3]);
        assert_eq!(worst[2].1, 2, "the first 9 seen stays ahead of the second");
    }
}
