use super::*;

/// Every shared text SQLite runs names its parameters `$1`, `$2`, ... in
/// order of first appearance: SQLite numbers `$n` by that order, not by
/// `n`, and binds positionally (a text naming `$2` first would swap the
/// values it is given).
#[tokio::test]
async fn sqlite_numbers_every_shared_parameter_as_postgres_does() {
    let dir = std::env::temp_dir().join(format!("agwire-records-{}", uuid::Uuid::new_v4()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("agwire.db");
    let store = crate::SqliteStore::open(&path).await.unwrap();
    let connection = rusqlite::Connection::open(&path).unwrap();
    let texts = [
        RECENT_MESSAGES,
        SETTINGS,
        JOB_CONFIG,
        SET_SETTINGS,
        THREAD_OWNER,
        LATEST_THREAD,
        THREAD_MESSAGES,
        LAST_SHOWN_BEFORE,
        SHOWN_MESSAGES,
        THREADS,
        THREAD,
        SET_THREAD_TITLE,
        PENDING_TOOL_CALLS,
        JOB_OF_THREAD_ID,
        ACTIVE_RUNS,
        DELETE_THREAD_ATTACHMENTS,
        DELETE_THREAD_REFS,
        DELETE_THREAD_EVENTS,
        DELETE_THREAD_RUNS,
        DELETE_THREAD_MESSAGES,
        DELETE_THREAD_TOOL_CALLS,
        DELETE_THREAD,
        UNNAMED_THREADS,
        NAME_THREAD,
        PUT_CALENDAR_EVENT,
        CALENDAR_EVENT,
        DELETE_CALENDAR_EVENT,
        CALENDAR_EVENTS,
        CREATE_JOB_THREAD,
        INSERT_JOB,
        UPDATE_JOB,
        JOB,
        JOB_OF_THREAD,
        JOBS,
        DELETE_JOB,
        DUE_JOBS,
        ADVANCE_JOB,
        EVENTS_AFTER,
        RUN,
        RUN_STATUS,
        STATUS_COUNTS,
    ];
    for sql in texts {
        let statement = connection.prepare(sql).unwrap();
        for i in 1..=statement.parameter_count() {
            assert_eq!(
                statement.parameter_name(i),
                Some(format!("${i}").as_str()),
                "parameter {i} of {sql}"
            );
        }
    }
    drop(store);
    let _ = std::fs::remove_dir_all(&dir);
}
