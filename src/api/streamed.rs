//! A stored schedule's JSON streamed to the client as it is written (`streamed_json`): the
//! body of `GET /v1/schedules/{id}` and of its export in the explicit form.

use super::ApiError;

/// A stored schedule's JSON in `form`, written on a blocking thread as the client reads it: a
/// 4096-NPU all-reduce's explicit JSON is 2.6 GB, never held whole. Read back first (a damaged
/// body is a 500 before anything is sent), its length counted (clients see a Content-Length,
/// not a chunked body); a client that goes away stops the writing.
pub(super) async fn streamed_json(
    stored: crate::store::ScheduleBody,
    form: crate::schedule::Form,
) -> Result<(u64, axum::body::Body), ApiError> {
    let (schedule, len) = tokio::task::spawn_blocking(move || {
        let mut s = stored.into_schedule()?;
        let len = crate::schedule::packed::schedule_json_len_in(&mut s, form).map_err(|e| e.to_string())?;
        Ok::<_, String>((s, len))
    })
    .await
    .map_err(|e| ApiError::Internal(e.to_string()))?
    .map_err(ApiError::Internal)?;
    let (tx, rx) = tokio::sync::mpsc::channel::<std::io::Result<Vec<u8>>>(4);
    tokio::task::spawn_blocking(move || {
        let mut out = std::io::BufWriter::with_capacity(1 << 20, Sender(tx.clone()));
        let written = serde_json::to_writer(&mut out, &schedule.written(form)).map_err(std::io::Error::from);
        if let Err(e) = written.and_then(|()| std::io::Write::flush(&mut out)) {
            // Gone (nothing to tell), or a failure mid-stream: the client sees a cut body.
            tracing::debug!("a schedule's JSON stream ended early: {e}");
            let _ = tx.blocking_send(Err(e));
        }
    });
    let chunks = futures_util::stream::unfold(rx, |mut rx| async move { rx.recv().await.map(|c| (c, rx)) });
    Ok((len, axum::body::Body::from_stream(chunks)))
}

/// The writing end of a streamed body: each buffer full is one chunk, sent when the client
/// has taken the ones before (at most a few MiB ahead).
struct Sender(tokio::sync::mpsc::Sender<std::io::Result<Vec<u8>>>);

impl std::io::Write for Sender {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0
            .blocking_send(Ok(buf.to_vec()))
            .map_err(|_| std::io::Error::new(std::io::ErrorKind::BrokenPipe, "the client went away"))?;
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}
