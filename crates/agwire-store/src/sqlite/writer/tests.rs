use super::*;

/// Under writes that never pause, the WAL is still started over: it
/// stays near its restart size instead of growing with what was written.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_wal_stays_bounded_under_writes_that_never_pause() {
    let dir = std::env::temp_dir().join(format!("agwire-wal-{}", uuid::Uuid::new_v4()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("wal.db");
    {
        let setup = Connection::open(&path).unwrap();
        setup
            .execute_batch(
                "PRAGMA journal_mode = WAL; CREATE TABLE b (id INTEGER PRIMARY KEY, v BLOB NOT NULL);",
            )
            .unwrap();
    }
    // Checkpoints every 10 ms, 64 frames (256 KiB) before a restart;
    // 96 MiB written in all, by eight writers that each send their next
    // write as soon as the last one is answered: the writer's queue is
    // never empty.
    let writer = Writer::open_with(
        &path,
        Tuning {
            period: std::time::Duration::from_millis(10),
            restart_frames: 64,
            ..Tuning::DEFAULT
        },
    )
    .unwrap();
    let wal = path.with_extension("db-wal");
    let mut largest = 0;
    let writers: Vec<_> = (0..8)
        .map(|_| {
            let writer = writer.clone();
            tokio::spawn(async move {
                for _ in 0..768 {
                    writer
                        .call(|tx| {
                            let mut insert =
                                tx.prepare_cached("INSERT INTO b (v) VALUES (zeroblob(4000))")?;
                            for _ in 0..4 {
                                insert.execute([])?;
                            }
                            Ok(())
                        })
                        .await
                        .unwrap();
                }
            })
        })
        .collect();
    while writers.iter().any(|w| !w.is_finished()) {
        largest = largest.max(std::fs::metadata(&wal).map_or(0, |m| m.len()));
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    }
    for w in writers {
        w.await.unwrap();
    }
    // What the rows hold (read through the WAL: the database file alone
    // holds only what checkpoints copied so far).
    let written: i64 = Connection::open(&path)
        .unwrap()
        .query_row("SELECT SUM(length(v)) FROM b", [], |row| row.get(0))
        .unwrap();
    let written = u64::try_from(written).unwrap();
    println!("rows of {written} bytes; the WAL at most {largest} bytes");
    // Never started over, the WAL holds all of it and more (~100 MB
    // seen); started over, what is written between two restarts
    // (7–20 MB seen; 51 MB once, on a machine busy with other tests,
    // where the checkpointer fell behind the writers).
    assert!(written > 80 << 20, "the test wrote {written} bytes only");
    assert!(
        largest < written / 4 * 3,
        "the WAL grew to {largest} bytes: it was never started over"
    );
    drop(writer);
    let _ = std::fs::remove_dir_all(&dir);
}

/// A WAL file larger than the trim size is cut back once writes stop
/// (starting the WAL over no longer cuts it: see `checkpoint`), and the
/// rows are all there.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_large_wal_file_is_cut_back_once_writes_stop() {
    let (dir, path) = file();
    let writer = Writer::open_with(
        &path,
        Tuning {
            period: std::time::Duration::from_millis(10),
            trim_above: 256 << 10,
            trim_after: std::time::Duration::from_millis(50),
            ..Tuning::DEFAULT
        },
    )
    .unwrap();
    let wal = path.with_extension("db-wal");
    // ~1 MiB of rows, more than the trim size.
    for _ in 0..64 {
        writer
            .call(|tx| {
                let mut insert = tx.prepare_cached("INSERT INTO t (v) VALUES (?1)")?;
                for v in 0..1000 {
                    insert.execute([v])?;
                }
                Ok(())
            })
            .await
            .unwrap();
    }
    let grown = std::fs::metadata(&wal).unwrap().len();
    assert!(grown > 256 << 10, "the WAL grew to {grown} bytes only");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    let mut size = grown;
    while size > 0 {
        assert!(
            std::time::Instant::now() < deadline,
            "the WAL file stayed at {size} bytes (grown to {grown}) after writes stopped"
        );
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        size = std::fs::metadata(&wal).map_or(0, |m| m.len());
    }
    let rows: i64 = Connection::open(&path)
        .unwrap()
        .query_row("SELECT COUNT(*) FROM t", [], |row| row.get(0))
        .unwrap();
    assert_eq!(rows, 64_000);
    // Writes go on after the trim.
    writer.call(insert_on(1)).await.unwrap();
    drop(writer);
    let _ = std::fs::remove_dir_all(&dir);
}

/// A database file for a writer, and the path to open it beside.
fn file() -> (std::path::PathBuf, std::path::PathBuf) {
    let dir = std::env::temp_dir().join(format!("agwire-writer-{}", uuid::Uuid::new_v4()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("w.db");
    Connection::open(&path)
        .unwrap()
        .execute_batch("PRAGMA journal_mode = WAL; CREATE TABLE t (v INTEGER NOT NULL);")
        .unwrap();
    (dir, path)
}

/// Which thread a call ran on, with its row written.
fn insert_on(v: i64) -> impl FnOnce(&Transaction<'_>) -> Result<String, Error> + Send {
    move |tx| {
        tx.execute("INSERT INTO t (v) VALUES (?1)", [v])?;
        Ok(std::thread::current().name().unwrap_or("").to_owned())
    }
}

/// A lone call runs on its caller's thread; a call made while another is
/// in flight goes to the writer's thread (and waits there for the
/// connection); both commit.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lone_call_runs_where_it_is_made_and_calls_side_by_side_go_to_the_writer() {
    let (dir, path) = file();
    let writer = Writer::open(&path).unwrap();
    let (entered, is_entered) = std_mpsc::channel();
    let (release, released) = std_mpsc::channel::<()>();
    let lone = tokio::spawn({
        let writer = writer.clone();
        async move {
            let caller = std::thread::current().id();
            let ran_on = writer
                .call(move |tx| {
                    tx.execute("INSERT INTO t (v) VALUES (1)", [])?;
                    entered.send(()).unwrap();
                    released.recv().unwrap();
                    Ok(std::thread::current().id())
                })
                .await;
            (caller, ran_on)
        }
    });
    is_entered
        .recv_timeout(std::time::Duration::from_secs(60))
        .unwrap();
    // The first call is in flight (it holds the connection): this one
    // goes to the thread.
    let beside = tokio::spawn({
        let writer = writer.clone();
        async move { writer.call(insert_on(2)).await }
    });
    // Released once the second call counts itself in flight (it then
    // goes to the thread whatever the first one does next).
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while writer.shared.in_flight.load(Ordering::Acquire) < 2 {
        assert!(
            std::time::Instant::now() < deadline,
            "the second call never started"
        );
        std::thread::yield_now();
    }
    release.send(()).unwrap();
    // The lone call ran on the tokio worker that made it.
    let (caller, ran_on) = lone.await.unwrap();
    assert_eq!(ran_on.unwrap(), caller);
    assert_eq!(beside.await.unwrap().unwrap(), "agwire-sqlite-writer");
    let connection = Connection::open(&path).unwrap();
    assert_eq!(values(&connection), [1, 2]);
    let _ = std::fs::remove_dir_all(&dir);
}

/// A lone call that fails or panics is undone and answered with an
/// error; the next lone call commits.
#[tokio::test(flavor = "current_thread")]
async fn a_lone_call_that_fails_or_panics_is_undone() {
    let (dir, path) = file();
    // (No quiet spell asked for: these calls follow one another.)
    let writer = Writer::open_with(
        &path,
        Tuning {
            quiet: std::time::Duration::ZERO,
            ..Tuning::DEFAULT
        },
    )
    .unwrap();
    let failed = writer
        .call(|tx| {
            tx.execute("INSERT INTO t (v) VALUES (1)", [])?;
            Err::<(), _>(Error::ThreadBusy)
        })
        .await;
    assert!(matches!(failed, Err(Error::ThreadBusy)));
    let panicked = writer
        .call(|tx| -> Result<(), Error> {
            tx.execute("INSERT INTO t (v) VALUES (2)", []).unwrap();
            panic!("a bug in one call");
        })
        .await;
    assert!(panicked.is_err());
    // On this (the caller's) thread: it ran alone.
    assert_ne!(
        writer.call(insert_on(3)).await.unwrap(),
        "agwire-sqlite-writer"
    );
    assert_eq!(values(&Connection::open(&path).unwrap()), [3]);
    let _ = std::fs::remove_dir_all(&dir);
}

/// A lone call never waits for another connection's write lock on its
/// caller's thread: it goes to the writer's thread, which waits, and
/// commits once the lock is free.
#[tokio::test(flavor = "current_thread")]
async fn a_lone_call_blocked_by_another_connection_goes_to_the_writer() {
    let (dir, path) = file();
    let writer = Writer::open(&path).unwrap();
    let other = Connection::open(&path).unwrap();
    other.execute_batch("BEGIN IMMEDIATE").unwrap();
    // The lock is let go a moment later, from another thread. Had the
    // call waited for it here, it would have got it then and run here;
    // going to the writer's thread, it runs there whenever that is.
    let holder = std::thread::spawn(move || {
        std::thread::sleep(std::time::Duration::from_millis(200));
        other.execute_batch("COMMIT").unwrap();
        other
    });
    assert_eq!(
        writer.call(insert_on(1)).await.unwrap(),
        "agwire-sqlite-writer"
    );
    assert_eq!(values(&holder.join().unwrap()), [1]);
    let _ = std::fs::remove_dir_all(&dir);
}

fn database() -> Connection {
    let connection = Connection::open_in_memory().unwrap();
    connection
        .execute_batch("CREATE TABLE t (v INTEGER NOT NULL);")
        .unwrap();
    connection
}

/// A call as the writer runs it, and where its answer arrives.
fn call<T: Send + 'static>(
    work: impl FnOnce(&Transaction<'_>) -> Result<T, Error> + Send + 'static,
) -> (Work, oneshot::Receiver<Result<T, Error>>) {
    let (to, answer) = oneshot::channel();
    let unit: Work = Box::new(move |tx| {
        Box::new(Pending {
            result: work(tx),
            to,
            undo: None,
        })
    });
    (unit, answer)
}

fn insert(v: i64) -> impl FnOnce(&Transaction<'_>) -> Result<(), Error> + Send + 'static {
    move |tx| {
        tx.execute("INSERT INTO t (v) VALUES (?1)", [v])?;
        Ok(())
    }
}

fn values(connection: &Connection) -> Vec<i64> {
    let mut statement = connection.prepare("SELECT v FROM t ORDER BY v").unwrap();
    statement
        .query_map([], |r| r.get(0))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap()
}

fn run_batch(connection: &mut Connection, batch: Vec<Work>) -> Result<(), String> {
    let mut batch = batch;
    let mut replies = Vec::new();
    let committed = commit_batch(connection, &mut batch, &mut replies);
    for reply in replies {
        reply.send(committed.clone());
    }
    committed
}

#[test]
fn a_failing_or_panicking_call_is_undone_alone() {
    let mut connection = database();
    let (first, first_answer) = call(insert(1));
    let (failing, failing_answer) = call(|tx| {
        tx.execute("INSERT INTO t (v) VALUES (2)", [])?;
        Err::<(), _>(Error::ThreadBusy)
    });
    let (panicking, panicking_answer) = call(|tx| -> Result<(), Error> {
        tx.execute("INSERT INTO t (v) VALUES (3)", []).unwrap();
        panic!("a bug in one call");
    });
    let (last, last_answer) = call(insert(4));
    run_batch(&mut connection, vec![first, failing, panicking, last]).unwrap();
    assert!(first_answer.blocking_recv().unwrap().is_ok());
    assert!(matches!(
        failing_answer.blocking_recv().unwrap(),
        Err(Error::ThreadBusy)
    ));
    // The panicking call's answer channel is dropped: its caller gets an error.
    assert!(panicking_answer.blocking_recv().is_err());
    assert!(last_answer.blocking_recv().unwrap().is_ok());
    assert_eq!(values(&connection), [1, 4]);
}

#[test]
fn when_sqlite_drops_the_transaction_nothing_of_the_batch_stays_and_every_caller_knows() {
    let mut connection = database();
    let (first, first_answer) = call(insert(1));
    // What SQLite does by itself on some errors (I/O, a full disk):
    // the whole transaction is rolled back under the calls' feet.
    let (dropping, dropping_answer) = call(|tx| {
        tx.execute_batch("ROLLBACK")?;
        Ok(())
    });
    let (after, after_answer) = call(insert(3));
    assert!(run_batch(&mut connection, vec![first, dropping, after]).is_err());
    assert!(first_answer.blocking_recv().unwrap().is_err());
    assert!(dropping_answer.blocking_recv().unwrap().is_err());
    // Never run outside the transaction.
    assert!(after_answer.blocking_recv().is_err());
    assert!(values(&connection).is_empty());
}
