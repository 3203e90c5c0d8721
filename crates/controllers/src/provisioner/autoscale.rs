//! Replicas from Coder's queue of provisioner jobs (`spec.autoscaling`), pure: which jobs the provisioner's daemons
//! can take, and how many daemons that asks for. Each daemon runs one job at a time. The queue is read at most once
//! per interval (`job_queue_interval`, 30 s) for each control plane and organization, shared by every provisioner
//! there (`JobQueues`).

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use coder_k8s_api::duration::parse_go_duration;
use coder_k8s_api::provisioner::AutoscalingSpec;
use coder_k8s_coder_client::types::jobs::{JobStatus, ProvisionerJob, daemon_takes_job, effective_tags};

/// Default of `autoscaling.minReplicas`.
pub const DEFAULT_MIN_REPLICAS: i32 = 1;
/// Default of `autoscaling.maxReplicas`.
pub const DEFAULT_MAX_REPLICAS: i32 = 10;
/// Default of `autoscaling.scaleDownDelay`.
pub const DEFAULT_SCALE_DOWN_DELAY: Duration = Duration::from_secs(300);
/// How many jobs one read asks Coder for (newest first).
pub const QUEUE_LIMIT: u32 = 1000;

/// The jobs of the queue that a provisioner's daemons can take.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Queue {
    pub pending: i32,
    pub running: i32,
}

/// What a job of the queue is, as far as counting goes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct QueuedJob {
    pub running: bool,
    pub tags: BTreeMap<String, String>,
}

impl QueuedJob {
    /// A pending or running job of Coder's list; `None` for a job in any other state.
    pub fn of(job: &ProvisionerJob) -> Option<Self> {
        let running = match job.status {
            JobStatus::Pending => false,
            JobStatus::Running => true,
            _ => return None,
        };
        Some(Self {
            running,
            tags: job.tags.clone(),
        })
    }
}

/// The jobs of `jobs` that daemons with the provisioner key's `tags` can take.
pub fn count(jobs: &[QueuedJob], tags: &BTreeMap<String, String>) -> Queue {
    let daemon = effective_tags(tags);
    let mut queue = Queue::default();
    for job in jobs.iter().filter(|job| daemon_takes_job(&daemon, &job.tags)) {
        if job.running {
            queue.running += 1;
        } else {
            queue.pending += 1;
        }
    }
    queue
}

/// The replicas the queue asks for now, and since when it has asked for fewer than `current`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Scaled {
    pub replicas: i32,
    /// Set while the queue asks for fewer daemons than run, until the scale-down delay has passed.
    pub lower_since: Option<Instant>,
}

/// The replicas for `queue`: enough daemons for every running and pending job (`jobsPerReplica` each), within the
/// bounds. More are asked for at once; fewer only once the queue has asked for fewer for the whole scale-down delay,
/// and never fewer than the running jobs (a stopped daemon finishes its running build first, but a build should not
/// wait for that).
pub fn replicas(
    spec: &AutoscalingSpec,
    queue: Queue,
    current: i32,
    lower_since: Option<Instant>,
    now: Instant,
) -> Scaled {
    let min = spec.min_replicas.unwrap_or(DEFAULT_MIN_REPLICAS).max(0);
    let max = spec.max_replicas.unwrap_or(DEFAULT_MAX_REPLICAS).max(min).max(1);
    let per = spec.jobs_per_replica.unwrap_or(1).max(1);
    let jobs = queue.pending.saturating_add(queue.running).max(0);
    let wanted = (jobs.saturating_add(per - 1) / per).clamp(min, max);
    let current = current.clamp(min, max);
    if wanted >= current {
        return Scaled {
            replicas: wanted,
            lower_since: None,
        };
    }
    let since = lower_since.unwrap_or(now);
    let delay = scale_down_delay(spec);
    if now.duration_since(since) < delay {
        return Scaled {
            replicas: current,
            lower_since: Some(since),
        };
    }
    Scaled {
        replicas: wanted.max(queue.running.min(max)),
        lower_since: None,
    }
}

/// `autoscaling.scaleDownDelay`; its default when unset or not a (non-negative) Go duration (admission checks the
/// syntax).
pub fn scale_down_delay(spec: &AutoscalingSpec) -> Duration {
    spec.scale_down_delay
        .as_deref()
        .and_then(|text| parse_go_duration(text).ok())
        .filter(|d| !d.negative)
        .map_or(DEFAULT_SCALE_DOWN_DELAY, |d| d.duration)
}

/// Where the queue is read: a control plane (`namespace/name`) and an organization.
pub type Place = (String, String, String);

/// One read of a place's queue: when, and the pending and running jobs.
type Read = (Instant, Arc<Vec<QueuedJob>>);

/// The last read of each place's queue, shared by the provisioners there (see the module documentation).
#[derive(Default)]
pub struct JobQueues {
    read: Mutex<HashMap<Place, Read>>,
}

impl JobQueues {
    /// The queue of `place` when it was read less than `interval` ago.
    pub fn fresh(&self, place: &Place, interval: Duration, now: Instant) -> Option<Arc<Vec<QueuedJob>>> {
        let read = self.read.lock().unwrap_or_else(PoisonError::into_inner);
        let (at, jobs) = read.get(place)?;
        (now.duration_since(*at) < interval).then(|| jobs.clone())
    }

    /// Keeps a new read of `place`, dropping reads older than four `interval`s (places no longer asked about).
    pub fn store(
        &self,
        place: Place,
        jobs: Vec<QueuedJob>,
        interval: Duration,
        now: Instant,
    ) -> Arc<Vec<QueuedJob>> {
        let jobs = Arc::new(jobs);
        let mut read = self.read.lock().unwrap_or_else(PoisonError::into_inner);
        read.retain(|_, (at, _)| now.duration_since(*at) < interval * 4);
        read.insert(place, (now, jobs.clone()));
        jobs
    }

    /// How many places have a read kept.
    pub fn len(&self) -> usize {
        self.read.lock().unwrap_or_else(PoisonError::into_inner).len()
    }

    /// Whether no read is kept.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tags(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    fn job(running: bool, pairs: &[(&str, &str)]) -> QueuedJob {
        QueuedJob {
            running,
            tags: effective_tags(&tags(pairs)),
        }
    }

    fn spec(min: i32, max: i32, per: i32, delay_secs: u64) -> AutoscalingSpec {
        AutoscalingSpec {
            min_replicas: Some(min),
            max_replicas: Some(max),
            jobs_per_replica: Some(per),
            scale_down_delay: Some(format!("{delay_secs}s")),
            ..AutoscalingSpec::default()
        }
    }

    #[test]
    fn only_jobs_the_daemons_can_take_are_counted() {
        let jobs = [
            job(false, &[("queue", "gpu")]),
            job(false, &[("queue", "gpu"), ("region", "eu")]),
            job(true, &[("queue", "gpu")]),
            job(false, &[("queue", "cpu")]),
            job(false, &[]),
        ];
        assert_eq!(
            count(&jobs, &tags(&[("queue", "gpu")])),
            Queue {
                pending: 1,
                running: 1
            },
            "the eu job needs a daemon with region=eu too; untagged jobs go to untagged daemons"
        );
        assert_eq!(
            count(&jobs, &tags(&[("queue", "gpu"), ("region", "eu")])),
            Queue {
                pending: 2,
                running: 1
            }
        );
        assert_eq!(
            count(&jobs, &BTreeMap::new()),
            Queue {
                pending: 1,
                running: 0
            }
        );
    }

    #[test]
    fn more_daemons_are_asked_for_at_once_within_the_bounds() {
        let now = Instant::now();
        let spec = spec(1, 5, 1, 60);
        let up = replicas(
            &spec,
            Queue {
                pending: 3,
                running: 1,
            },
            1,
            None,
            now,
        );
        assert_eq!(
            up,
            Scaled {
                replicas: 4,
                lower_since: None
            }
        );
        let capped = replicas(
            &spec,
            Queue {
                pending: 30,
                running: 2,
            },
            4,
            None,
            now,
        );
        assert_eq!(capped.replicas, 5);
        let idle = replicas(&spec, Queue::default(), 0, None, now);
        assert_eq!(idle.replicas, 1, "never below minReplicas");
        let two_per = replicas(
            &self::spec(0, 10, 2, 60),
            Queue {
                pending: 3,
                running: 0,
            },
            0,
            None,
            now,
        );
        assert_eq!(two_per.replicas, 2, "three jobs at two per daemon");
    }

    #[test]
    fn fewer_daemons_only_after_the_delay_and_never_below_the_running_jobs() {
        let start = Instant::now();
        let spec = spec(0, 10, 1, 60);
        let quiet = Queue {
            pending: 0,
            running: 2,
        };
        let first = replicas(&spec, quiet, 5, None, start);
        assert_eq!(
            first,
            Scaled {
                replicas: 5,
                lower_since: Some(start)
            }
        );
        let later = start + Duration::from_secs(30);
        let waiting = replicas(&spec, quiet, 5, first.lower_since, later);
        assert_eq!(
            waiting,
            Scaled {
                replicas: 5,
                lower_since: Some(start)
            }
        );
        let after = start + Duration::from_secs(61);
        let down = replicas(&spec, quiet, 5, waiting.lower_since, after);
        assert_eq!(
            down,
            Scaled {
                replicas: 2,
                lower_since: None
            },
            "the two running builds keep their daemons"
        );
        // A busier queue meanwhile resets the wait.
        let busy = replicas(
            &spec,
            Queue {
                pending: 4,
                running: 2,
            },
            5,
            Some(start),
            later,
        );
        assert_eq!(
            busy,
            Scaled {
                replicas: 6,
                lower_since: None
            }
        );
    }

    #[test]
    fn a_read_is_shared_for_one_interval_per_place() {
        let queues = JobQueues::default();
        let place: Place = ("ns".into(), "cp".into(), "org".into());
        let (now, interval) = (Instant::now(), Duration::from_secs(30));
        assert!(queues.fresh(&place, interval, now).is_none());
        queues.store(place.clone(), vec![job(false, &[])], interval, now);
        assert_eq!(
            queues
                .fresh(&place, interval, now + Duration::from_secs(29))
                .map(|j| j.len()),
            Some(1)
        );
        assert!(queues.fresh(&place, interval, now + interval).is_none());
        let other: Place = ("ns".into(), "cp".into(), "other".into());
        queues.store(other, Vec::new(), interval, now + interval * 5);
        assert_eq!(queues.len(), 1, "a place not read for four intervals is dropped");
    }
}
