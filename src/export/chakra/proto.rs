//! The Chakra ET messages ccsynth writes, declared with prost from chakra's `et_def.proto`
//! (package `ChakraProtoMsg`): the fields ccsynth writes and reads, and the node types.

/// `AttributeProto` (et_def.proto): a name and one value.
#[derive(Clone, PartialEq, prost::Message)]
pub struct AttributeProto {
    #[prost(string, tag = "1")]
    pub name: String,
    #[prost(string, tag = "2")]
    pub doc_string: String,
    #[prost(oneof = "attribute_proto::Value", tags = "3, 7, 9, 13, 27, 29")]
    pub value: Option<attribute_proto::Value>,
}

pub mod attribute_proto {
    /// The members of `AttributeProto.value` ccsynth uses.
    #[derive(Clone, PartialEq, prost::Oneof)]
    pub enum Value {
        #[prost(double, tag = "3")]
        DoubleVal(f64),
        #[prost(int32, tag = "7")]
        Int32Val(i32),
        #[prost(int64, tag = "9")]
        Int64Val(i64),
        #[prost(uint64, tag = "13")]
        Uint64Val(u64),
        #[prost(bool, tag = "27")]
        BoolVal(bool),
        #[prost(string, tag = "29")]
        StringVal(String),
    }
}

/// `GlobalMetadata`: the first message of every file.
#[derive(Clone, PartialEq, prost::Message)]
pub struct GlobalMetadata {
    #[prost(string, tag = "1")]
    pub version: String,
    #[prost(message, repeated, tag = "2")]
    pub attr: Vec<AttributeProto>,
}

/// `Node`: one operation of one NPU.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Node {
    #[prost(uint64, tag = "1")]
    pub id: u64,
    #[prost(string, tag = "2")]
    pub name: String,
    /// A `NodeType`.
    #[prost(int32, tag = "3")]
    pub r#type: i32,
    #[prost(uint64, repeated, tag = "4")]
    pub ctrl_deps: Vec<u64>,
    #[prost(uint64, repeated, tag = "5")]
    pub data_deps: Vec<u64>,
    #[prost(uint64, tag = "6")]
    pub start_time_micros: u64,
    #[prost(uint64, tag = "7")]
    pub duration_micros: u64,
    #[prost(message, repeated, tag = "10")]
    pub attr: Vec<AttributeProto>,
}

/// `NodeType` values.
pub const COMP_NODE: i32 = 4;
pub const COMM_SEND_NODE: i32 = 5;
pub const COMM_RECV_NODE: i32 = 6;
pub const COMM_COLL_NODE: i32 = 7;
