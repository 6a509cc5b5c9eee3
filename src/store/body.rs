//! Schedule bodies as the store keeps them: small ones as JSON, larger ones packed
//! (`schedule::packed`) and compressed with zstd; what reading one back gives
//! (`ScheduleBody`), and the limits on what is stored.
use super::{Store, StoreError, plausible_id};
use crate::schedule::Schedule;
use sqlx::Row;

/// What a schedule stored by reference has in place of its topology: the first occurrence in
/// the body is the top-level field (the fields before it are the format, algorithm and seed).
pub const TOPOLOGY_BY_REF: &str = "\"topology\":null";

/// Bytes of one stored body at most: SQLite's default largest value is 10^9 bytes, and
/// PostgreSQL's 1 GiB.
pub const STORED_MAX_BYTES: usize = 900_000_000;

/// Schedule bodies from this size on are stored compressed.
pub const COMPRESS_FROM_BYTES: usize = 64 << 10;

/// A schedule body as it is stored: the JSON, or (from `COMPRESS_FROM_BYTES` on) compressed
/// with zstd, the JSON (rows stored before the packed form) or the packed schedule
/// (`schedule::packed`). Schedules are long runs of near-identical transfers: 10 to 30 times
/// smaller.
pub enum StoredBody {
    Json(String),
    Zstd {
        bytes: Vec<u8>,
        /// Bytes of the JSON it holds.
        json_len: usize,
    },
}

impl StoredBody {
    /// Compresses `json` when it is large. CPU-bound on large bodies: call it off the async
    /// threads.
    pub fn pack(json: String) -> Result<StoredBody, StoreError> {
        if json.len() < COMPRESS_FROM_BYTES {
            return Ok(StoredBody::Json(json));
        }
        let bytes = zstd::bulk::compress(json.as_bytes(), 3).map_err(|e| StoreError::Compress(e.to_string()))?;
        Ok(StoredBody::Zstd { bytes, json_len: json.len() })
    }

    /// Compresses a packed schedule (`schedule::packed::encode`) whose JSON form would take
    /// `json_len` bytes. CPU-bound: call it off the async threads.
    pub fn packed(bytes: &[u8], json_len: usize) -> Result<StoredBody, StoreError> {
        let bytes = zstd::bulk::compress(bytes, 3).map_err(|e| StoreError::Compress(e.to_string()))?;
        Ok(StoredBody::Zstd { bytes, json_len })
    }

    /// Bytes as stored.
    pub fn stored_len(&self) -> usize {
        match self {
            StoredBody::Json(s) => s.len(),
            StoredBody::Zstd { bytes, .. } => bytes.len(),
        }
    }

    /// Bytes of the JSON it holds (or that the packed schedule it holds would take).
    pub fn json_len(&self) -> usize {
        match self {
            StoredBody::Json(s) => s.len(),
            StoredBody::Zstd { json_len, .. } => *json_len,
        }
    }
}

/// What a compressed body (`schedules.body_zstd`) holds: JSON, or a packed schedule.
fn unpack(z: &[u8], id: &str) -> Result<Vec<u8>, StoreError> {
    zstd::stream::decode_all(z).map_err(|e| StoreError::Corrupt(format!("schedule {id}: compressed body: {e}")))
}

/// A stored schedule as read: its JSON (the topology spliced back in), or its packed form
/// (`schedule::packed`) with the topology it was stored without.
pub enum ScheduleBody {
    Json(String),
    Packed {
        bytes: Vec<u8>,
        /// The stored topology's JSON, for a schedule stored by reference.
        topology: Option<String>,
    },
}

impl ScheduleBody {
    /// Bytes of the JSON form (for a packed body, as it recorded them).
    pub fn json_len(&self) -> usize {
        match self {
            ScheduleBody::Json(s) => s.len(),
            ScheduleBody::Packed { bytes, .. } => crate::schedule::packed::split(bytes)
                .map_or(bytes.len(), |p| usize::try_from(p.json_len).unwrap_or(usize::MAX)),
        }
    }

    /// The schedule. CPU work on large bodies: call it off the async threads.
    pub fn into_schedule(self) -> Result<Schedule, String> {
        match self {
            ScheduleBody::Json(s) => Schedule::from_json(&s).map_err(|e| e.to_string()),
            ScheduleBody::Packed { bytes, topology } => {
                crate::schedule::packed::decode(&bytes, |header| with_topology(header, &topology))
            }
        }
    }

    /// A packed body's schedule without its conditions and transfers, and how many transfers
    /// it holds, read without decoding them (`schedule::packed::outline`): what an export's
    /// cheap test needs before the whole is decoded (torus:128x128's all-reduce decodes to
    /// 1.6 GB in seconds). A JSON body stored small (under `COMPRESS_FROM_BYTES`) is read
    /// whole: a few kilobytes of ranges can be millions of (NPU, slot) cells, which the
    /// export's budget counts. `None` for a larger JSON body (rows from before packing) or a
    /// damaged one (decoding it whole says why).
    pub fn outline(&self) -> Option<(Schedule, usize)> {
        match self {
            ScheduleBody::Json(s) if s.len() < COMPRESS_FROM_BYTES => Schedule::from_json(s).ok().map(|s| {
                let n = s.transfers.len();
                (s, n)
            }),
            ScheduleBody::Json(_) => None,
            ScheduleBody::Packed { bytes, topology } => {
                crate::schedule::packed::outline(bytes, |header| with_topology(header, topology)).ok()
            }
        }
    }

    /// The JSON, as `GET /v1/schedules/{id}` serves it. CPU work on large bodies: call it off
    /// the async threads.
    pub fn into_json(self) -> Result<String, String> {
        match self {
            ScheduleBody::Json(s) => Ok(s),
            packed => serde_json::to_string(&packed.into_schedule()?).map_err(|e| e.to_string()),
        }
    }
}

/// A stored header with the topology it was stored without spliced back in.
fn with_topology(header: &str, topology: &Option<String>) -> String {
    match topology {
        Some(t) => header.replacen(TOPOLOGY_BY_REF, &format!("\"topology\":{t}"), 1),
        None => header.to_string(),
    }
}

impl Store {
    /// A schedule's body (JSON with its topology spliced back in when it is stored by reference,
    /// or packed with that topology beside it; the topology's row is kept for it even when
    /// soft-deleted), and its topology id.
    pub async fn schedule_body(&self, id: &str) -> Result<Option<(ScheduleBody, String)>, StoreError> {
        if !plausible_id(id) {
            return Ok(None);
        }
        let row = sqlx::query("SELECT body, body_zstd, topology_id, topology_by_ref FROM schedules WHERE id = $1")
            .bind(id)
            .fetch_optional(&self.pool)
            .await?;
        let Some(r) = row else { return Ok(None) };
        let (body, zstd, topology_id): (String, Option<Vec<u8>>, String) =
            (r.try_get("body")?, r.try_get("body_zstd")?, r.try_get("topology_id")?);
        let by_ref = r.try_get::<i64, _>("topology_by_ref")? != 0;
        let topology = match by_ref {
            true => Some(
                sqlx::query_scalar::<_, String>("SELECT body FROM topologies WHERE id = $1")
                    .bind(&topology_id)
                    .fetch_one(&self.pool)
                    .await?,
            ),
            false => None,
        };
        let corrupt = |e: &dyn std::fmt::Display| StoreError::Corrupt(format!("schedule {id}: {e}"));
        // Decompressing up to --max-result-bytes of JSON is CPU work: off the async threads.
        let owner = id.to_string();
        let mut body = match zstd {
            None => body,
            Some(z) => {
                let bytes =
                    tokio::task::spawn_blocking(move || unpack(&z, &owner)).await.map_err(|e| corrupt(&e))??;
                if crate::schedule::packed::is_packed(&bytes) {
                    return Ok(Some((ScheduleBody::Packed { bytes, topology }, topology_id)));
                }
                String::from_utf8(bytes).map_err(|e| corrupt(&e))?
            }
        };
        if let Some(topology) = topology {
            let at = body
                .find(TOPOLOGY_BY_REF)
                .ok_or_else(|| StoreError::Corrupt(format!("schedule {id}: stored by reference without the marker")))?;
            body.replace_range(at..at + TOPOLOGY_BY_REF.len(), &format!("\"topology\":{topology}"));
        }
        Ok(Some((ScheduleBody::Json(body), topology_id)))
    }
}
