//! The group commit's loop against a backend of plain memory: what goes in
//! which group, and what each caller hears.

use std::sync::Mutex as StdMutex;
use std::time::Duration;

use tokio::sync::{Semaphore, oneshot};

use super::*;

/// A write of one number, and where its answer goes.
struct Put {
    value: i64,
    reply: oneshot::Sender<Result<(), String>>,
}

/// Why a group of the memory backend failed.
#[derive(Debug)]
enum Failure {
    /// Rolled back: nothing of the group is there.
    RolledBack,
    /// The connection was lost: the group may be there or not.
    Lost,
}

/// Memory as a database: a group holding a negative number is rolled back
/// as a whole, one holding 0 loses its connection after committing; a
/// number alone fails when negative. `gate` holds each group until a
/// permit is given (so calls queue meanwhile).
struct Memory {
    rows: StdMutex<Vec<i64>>,
    groups: StdMutex<Vec<Vec<i64>>>,
    gate: Option<Arc<Semaphore>>,
    /// Groups that reached the gate.
    entered: std::sync::atomic::AtomicUsize,
    /// Postpone a second number with the same tens digit to the next group.
    one_per_ten: bool,
}

impl Memory {
    fn new(gate: Option<Arc<Semaphore>>) -> Self {
        Self {
            rows: StdMutex::new(Vec::new()),
            groups: StdMutex::new(Vec::new()),
            gate,
            entered: std::sync::atomic::AtomicUsize::new(0),
            one_per_ten: false,
        }
    }
}

impl Commit for Arc<Memory> {
    type Call = Put;
    type Failure = Failure;

    fn arrange(&self, group: &mut Vec<Put>, later: &mut Vec<Put>) {
        if !self.one_per_ten {
            return;
        }
        let mut seen = std::collections::HashSet::new();
        let mut kept = Vec::new();
        for put in group.drain(..) {
            if seen.insert(put.value / 10) {
                kept.push(put);
            } else {
                later.push(put);
            }
        }
        *group = kept;
    }

    async fn together(&self, group: &mut Vec<Put>) -> Result<(), Failure> {
        self.entered
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        if let Some(gate) = &self.gate {
            gate.acquire().await.unwrap().forget();
        }
        let values: Vec<i64> = group.iter().map(|p| p.value).collect();
        self.groups.lock().unwrap().push(values.clone());
        if values.iter().any(|v| *v < 0) {
            return Err(Failure::RolledBack);
        }
        self.rows.lock().unwrap().extend(&values);
        if values.contains(&0) {
            return Err(Failure::Lost);
        }
        for put in group.drain(..) {
            let _ = put.reply.send(Ok(()));
        }
        Ok(())
    }

    async fn alone(&self, put: Put) {
        let answer = if put.value < 0 {
            Err("refused".to_owned())
        } else {
            self.rows.lock().unwrap().push(put.value);
            Ok(())
        };
        let _ = put.reply.send(answer);
    }

    fn undone(&self, failure: &Failure) -> bool {
        matches!(failure, Failure::RolledBack)
    }

    fn fail(&self, put: Put, failure: &Failure) {
        let _ = put.reply.send(Err(format!("{failure:?}")));
    }
}

const SHAPE: Shape = Shape {
    max_group: 64,
    lanes: 1,
    first_guess: Duration::from_millis(1),
    queue: 1024,
};

/// Queues `value`; the answer arrives on the receiver.
async fn put(
    group: &GroupCommit<Arc<Memory>>,
    value: i64,
) -> oneshot::Receiver<Result<(), String>> {
    let (reply, answer) = oneshot::channel();
    group.queue(Put { value, reply }).await.unwrap();
    answer
}

/// Waits (at most a minute) until `n` groups have begun to be written.
async fn groups_begun(memory: &Memory, n: usize) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    while memory.entered.load(std::sync::atomic::Ordering::SeqCst) < n {
        assert!(
            tokio::time::Instant::now() < deadline,
            "no group {n} in a minute"
        );
        tokio::task::yield_now().await;
    }
}

#[tokio::test]
async fn calls_queued_while_a_group_commits_go_together_in_the_next() {
    let gate = Arc::new(Semaphore::new(0));
    let memory = Arc::new(Memory::new(Some(gate.clone())));
    let group = GroupCommit::spawn(memory.clone(), SHAPE, CancellationToken::new());
    let first = put(&group, 1).await;
    groups_begun(&memory, 1).await;
    // The first call's group is being written (held at the gate) while ten
    // more arrive.
    let mut rest = Vec::new();
    for value in 2..=11 {
        rest.push(put(&group, value).await);
    }
    gate.add_permits(2);
    first.await.unwrap().unwrap();
    for answer in rest {
        answer.await.unwrap().unwrap();
    }
    let groups = memory.groups.lock().unwrap().clone();
    assert_eq!(groups, vec![vec![1], (2..=11).collect::<Vec<_>>()]);
}

// One worker, as a replica at a CPU quota of less than a core has: callers
// made ready in one tick share a group even though the lane is woken by the
// first (and, without the yield in `Lane::take`, run straight after it).
#[tokio::test(flavor = "multi_thread", worker_threads = 1)]
async fn callers_ready_together_go_in_one_group() {
    let memory = Arc::new(Memory::new(None));
    let group = GroupCommit::spawn(memory.clone(), SHAPE, CancellationToken::new());
    // Spawned from a task on the worker, the ten callers wait in its queue
    // until that task ends, and then run one after the other.
    let callers = tokio::spawn({
        let group = group.clone();
        async move {
            (1..=10)
                .map(|value| {
                    let group = group.clone();
                    tokio::spawn(async move { put(&group, value).await.await })
                })
                .collect::<Vec<_>>()
        }
    })
    .await
    .unwrap();
    for caller in callers {
        caller.await.unwrap().unwrap().unwrap();
    }
    // (In the order they ran: tokio runs the last task spawned first.)
    let mut groups = memory.groups.lock().unwrap().clone();
    groups.iter_mut().for_each(|group| group.sort_unstable());
    assert_eq!(groups, vec![(1..=10).collect::<Vec<_>>()]);
}

#[tokio::test]
async fn a_group_takes_at_most_its_size() {
    let gate = Arc::new(Semaphore::new(0));
    let memory = Arc::new(Memory::new(Some(gate.clone())));
    let shape = Shape {
        max_group: 4,
        ..SHAPE
    };
    let group = GroupCommit::spawn(memory.clone(), shape, CancellationToken::new());
    let mut answers = Vec::new();
    for value in 1..=10 {
        answers.push(put(&group, value).await);
    }
    gate.add_permits(10);
    for answer in answers {
        answer.await.unwrap().unwrap();
    }
    let sizes: Vec<usize> = memory.groups.lock().unwrap().iter().map(Vec::len).collect();
    assert!(sizes.iter().all(|n| *n <= 4), "{sizes:?}");
    assert_eq!(sizes.iter().sum::<usize>(), 10);
}

#[tokio::test]
async fn a_group_the_database_undid_goes_again_call_by_call_and_only_the_bad_call_fails() {
    let gate = Arc::new(Semaphore::new(0));
    let memory = Arc::new(Memory::new(Some(gate.clone())));
    let group = GroupCommit::spawn(memory.clone(), SHAPE, CancellationToken::new());
    let mut answers = Vec::new();
    for value in [1, 2, -3, 4] {
        answers.push((value, put(&group, value).await));
    }
    gate.add_permits(10);
    for (value, answer) in answers {
        let answer = answer.await.unwrap();
        assert_eq!(answer.is_ok(), value > 0, "{value}: {answer:?}");
    }
    let mut rows = memory.rows.lock().unwrap().clone();
    rows.sort_unstable();
    assert_eq!(rows, vec![1, 2, 4], "each good call written once");
}

#[tokio::test]
async fn a_group_that_may_have_committed_is_never_written_again() {
    let gate = Arc::new(Semaphore::new(0));
    let memory = Arc::new(Memory::new(Some(gate.clone())));
    let group = GroupCommit::spawn(memory.clone(), SHAPE, CancellationToken::new());
    let mut answers = Vec::new();
    for value in [5, 0, 6] {
        answers.push(put(&group, value).await);
    }
    gate.add_permits(10);
    for answer in answers {
        assert_eq!(answer.await.unwrap(), Err("Lost".to_owned()));
    }
    let mut rows = memory.rows.lock().unwrap().clone();
    rows.sort_unstable();
    assert_eq!(rows, vec![0, 5, 6], "written by the lost group only");
}

#[tokio::test]
async fn calls_a_backend_holds_back_go_first_in_the_next_group_in_their_order() {
    let gate = Arc::new(Semaphore::new(0));
    let mut memory = Memory::new(Some(gate.clone()));
    memory.one_per_ten = true;
    let memory = Arc::new(memory);
    let group = GroupCommit::spawn(memory.clone(), SHAPE, CancellationToken::new());
    let mut answers = Vec::new();
    for value in [11, 12, 21, 13, 22] {
        answers.push(put(&group, value).await);
    }
    gate.add_permits(10);
    for answer in answers {
        answer.await.unwrap().unwrap();
    }
    let groups = memory.groups.lock().unwrap().clone();
    assert_eq!(groups, vec![vec![11, 21], vec![12, 22], vec![13]]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lanes_write_groups_side_by_side() {
    let gate = Arc::new(Semaphore::new(0));
    let memory = Arc::new(Memory::new(Some(gate.clone())));
    let shape = Shape { lanes: 2, ..SHAPE };
    let group = GroupCommit::spawn(memory.clone(), shape, CancellationToken::new());
    let first = put(&group, 1).await;
    groups_begun(&memory, 1).await;
    // The first lane's group is held at the gate, longer than a commit
    // usually takes: the other lane takes the next call and begins its own
    // group meanwhile.
    let second = put(&group, 2).await;
    groups_begun(&memory, 2).await;
    gate.add_permits(2);
    first.await.unwrap().unwrap();
    second.await.unwrap().unwrap();
    let groups = memory.groups.lock().unwrap().clone();
    assert_eq!(groups.len(), 2, "{groups:?}");
}

/// A lane that finds a group being written waits for its commit, and then
/// takes everything that arrived meanwhile as one group — not a group of
/// one per call. (A commit is taken to take an hour here, so the group in
/// flight is never slow enough for a lane to go on without it.)
#[tokio::test]
async fn a_second_lane_gathers_calls_while_a_group_commits_in_usual_time() {
    let gate = Arc::new(Semaphore::new(0));
    let memory = Arc::new(Memory::new(Some(gate.clone())));
    let shape = Shape {
        lanes: 4,
        first_guess: Duration::from_secs(3600),
        ..SHAPE
    };
    let group = GroupCommit::spawn(memory.clone(), shape, CancellationToken::new());
    let first = put(&group, 1).await;
    groups_begun(&memory, 1).await;
    let mut rest = vec![put(&group, 2).await];
    // Until a lane has taken it: a lane that would write it at once has
    // begun its group by then (nothing in between awaits).
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    while group.queued() > 0 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "not taken in a minute"
        );
        tokio::task::yield_now().await;
    }
    // (These wait in the queue: the lane holding 2 takes them when the
    // first group has committed.)
    for value in 3..=5 {
        rest.push(put(&group, value).await);
    }
    assert_eq!(
        memory.entered.load(std::sync::atomic::Ordering::SeqCst),
        1,
        "no second group while the first commits in usual time"
    );
    gate.add_permits(2);
    first.await.unwrap().unwrap();
    for answer in rest {
        answer.await.unwrap().unwrap();
    }
    let groups = memory.groups.lock().unwrap().clone();
    assert_eq!(groups, vec![vec![1], vec![2, 3, 4, 5]]);
}

#[tokio::test]
async fn the_loop_ends_when_stopped_and_callers_hear_so() {
    let memory = Arc::new(Memory::new(None));
    let stop = CancellationToken::new();
    let group = GroupCommit::spawn(memory.clone(), SHAPE, stop.clone());
    put(&group, 1).await.await.unwrap().unwrap();
    stop.cancel();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    // Once the loop is gone its queue is closed: a call is refused.
    loop {
        let (reply, _answer) = oneshot::channel();
        if let Err(error) = group.queue(Put { value: 2, reply }).await {
            assert!(matches!(error, Error::ShuttingDown), "{error}");
            break;
        }
        assert!(tokio::time::Instant::now() < deadline, "still queueing");
        tokio::task::yield_now().await;
    }
}

#[test]
fn a_thread_of_its_own_writes_groups_and_ends_with_its_last_handle() {
    let memory = Arc::new(Memory::new(None));
    let group = GroupCommit::spawn_thread(memory.clone(), SHAPE, "group-test").unwrap();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    runtime.block_on(async {
        for value in 1..=3 {
            put(&group, value).await.await.unwrap().unwrap();
        }
    });
    assert_eq!(*memory.rows.lock().unwrap(), vec![1, 2, 3]);
    drop(group);
    // The thread held the only other reference to the backend.
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    while Arc::strong_count(&memory) > 1 {
        assert!(
            std::time::Instant::now() < deadline,
            "the thread is still there"
        );
        std::thread::yield_now();
    }
}
