//! Schedules in other programs' formats: MSCCL XML, for the MSCCL executor and RCCL. Pure
//! functions of a valid schedule; the engine validates before it calls them.

pub mod msccl;
