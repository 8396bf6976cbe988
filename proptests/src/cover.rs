//! Coverage of the properties' checks: a check only runs when its preconditions hold (the
//! apply succeeded, no fault was injected, the plan did not error, …), so a property whose
//! generated cases never met them would pass without having checked anything. Each property
//! calls [`hit`] where a check runs; the runner (`tests/properties.rs`) reads the checks a case
//! reached with [`take`], counts the cases per check, prints the counts and fails when one is
//! below the property's stated minimum.
//!
//! The crash property also records which event kinds it cut the log after ([`killed_after`]),
//! so a run can show every kind of event an apply appends was a kill point.

use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Mutex;

thread_local! {
    static HITS: RefCell<BTreeSet<&'static str>> = const { RefCell::new(BTreeSet::new()) };
}

/// Records that `check` ran in the current case (this thread's).
pub fn hit(check: &'static str) {
    HITS.with(|h| h.borrow_mut().insert(check));
}

/// The checks the current case ran since the last call, and forgets them.
pub fn take() -> BTreeSet<&'static str> {
    HITS.with(|h| std::mem::take(&mut *h.borrow_mut()))
}

static KILL_POINTS: Mutex<BTreeMap<String, u32>> = Mutex::new(BTreeMap::new());
static APPENDED: Mutex<BTreeMap<String, u32>> = Mutex::new(BTreeMap::new());

/// The kind of an event (its variant's name, as `cairn log` shows it).
pub fn kind(e: &cairn::state::EventBody) -> String {
    e.kind().to_string()
}

/// Records that an apply appended an event of `kind`.
pub fn appended(kind: &str) {
    *APPENDED
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .entry(kind.to_string())
        .or_default() += 1;
}

/// Records a crash right after an event of `kind`.
pub fn killed_after(kind: &str) {
    *KILL_POINTS
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .entry(kind.to_string())
        .or_default() += 1;
}

/// How often each kind was a kill point.
pub fn kill_points() -> BTreeMap<String, u32> {
    KILL_POINTS
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .clone()
}

/// How often applies appended each kind.
pub fn appended_kinds() -> BTreeMap<String, u32> {
    APPENDED.lock().unwrap_or_else(|e| e.into_inner()).clone()
}
