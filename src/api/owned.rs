//! What a caller may see of what clients made: everything without tokens, only its own with
//! them (`visible`); a schedule it may not see is refused as a missing one is (`own_schedule`).

use super::{ApiError, Caller, Shared};

/// Whether `caller` may see what `owner` made: everything without tokens, its own with them.
pub(super) fn visible(caller: &Caller, owner: Option<&str>) -> bool {
    caller.0.as_deref().is_none_or(|me| owner == Some(me))
}

/// Refuses a schedule the caller may not see (another client's) or that does not exist.
pub(super) async fn own_schedule(st: &Shared, caller: &Caller, id: &str) -> Result<(), ApiError> {
    match st.store.schedule_owner(id).await? {
        Some(owner) if visible(caller, owner.as_deref()) => Ok(()),
        _ => Err(ApiError::NotFound("schedule", id.to_string())),
    }
}
