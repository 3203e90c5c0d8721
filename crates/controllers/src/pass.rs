//! One pass over one object: what every step of every kind reads — the object, the shared context, its UID, the
//! kind's memory of it — and the status the pass builds, next to the status the object shows. Steps set conditions
//! on it; the status writer writes it.

use std::time::Duration;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use kube::ResourceExt;

use crate::conditions::{Decided, Requeue, WithConditions, remove_condition, set_condition};
use crate::context::Context;
use crate::error::{Error, Result};
use crate::halt::Halt;
use crate::kind::Kind;
use crate::memory::PerObject;

/// One pass over `object`.
pub struct Pass<'a, K: Kind> {
    pub object: &'a K,
    pub ctx: &'a Context,
    memory: &'a PerObject<K::Memory>,
    pub uid: String,
    /// The status the object really has: the cached one, or this process's last write when the cache has not
    /// caught up with it (also a write earlier in this pass).
    pub shown: Option<K::Status>,
    /// The status this pass builds, starting from `shown`.
    pub status: K::Status,
    /// When the pass began: every condition it sets carries this time.
    pub now: Timestamp,
    /// The soonest any step asked for the next pass (kinds whose steps each say how soon they need one).
    pub next: Option<Duration>,
}

impl<'a, K: Kind> Pass<'a, K> {
    /// A pass over `object`, which must carry a UID (every stored object does).
    pub fn begin(object: &'a K, ctx: &'a Context, memory: &'a PerObject<K::Memory>) -> Result<Self> {
        let uid = object.meta().uid.clone().ok_or(Error::MissingMetadata)?;
        let shown = ctx.statuses.effective(&uid, object.status());
        Ok(Self {
            object,
            ctx,
            memory,
            uid,
            status: shown.clone().unwrap_or_default(),
            shown,
            now: Timestamp::now(),
            next: None,
        })
    }

    pub fn namespace(&self) -> String {
        self.object.namespace().unwrap_or_default()
    }

    pub fn name(&self) -> String {
        self.object.name_any()
    }

    pub fn generation(&self) -> Option<i64> {
        self.object.meta().generation
    }

    /// The time of the pass as Kubernetes writes it.
    pub fn time(&self) -> Time {
        Time(self.now)
    }

    /// The requeue after errors and while waiting on something outside the operator.
    pub fn retry(&self) -> Duration {
        self.ctx.settings.retry_interval
    }

    /// What earlier passes remembered of the object.
    pub fn memory(&self) -> K::Memory {
        self.memory.get(&self.uid)
    }

    /// Changes what the next passes remember of the object.
    pub fn remember(&self, change: impl FnOnce(&mut K::Memory)) {
        self.memory.update(&self.uid, change);
    }

    /// Asks for the next pass after `after` at the latest.
    pub fn soon(&mut self, after: Duration) {
        self.next = Some(self.next.map_or(after, |next| next.min(after)));
    }
}

impl<K: Kind> Pass<'_, K>
where
    K::Status: WithConditions,
{
    /// Sets a condition with the object's generation and the pass's time.
    pub fn set(&mut self, decided: Decided) {
        let (generation, now) = (self.generation(), self.time());
        set_condition(self.status.conditions_mut(), decided, generation, now);
    }

    pub fn set_all(&mut self, decided: Vec<Decided>) {
        for one in decided {
            self.set(one);
        }
    }

    /// Sets `decided` and stops the pass: what it built so far is written, and the next pass comes after the retry
    /// interval.
    pub fn stop(&mut self, decided: Decided) -> Halt<Requeue> {
        self.set(decided);
        Halt::Settled(Requeue::after(self.retry()))
    }

    /// Sets the condition `type_` as decided, or removes it (`None`: it is shown only when it says something).
    pub fn show(&mut self, type_: &str, decided: Option<Decided>) {
        match decided {
            Some(decided) => self.set(decided),
            None => remove_condition(self.status.conditions_mut(), type_),
        }
    }
}
