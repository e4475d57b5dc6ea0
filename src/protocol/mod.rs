//! The operation contract: wire types, the `AGENT_TOOLS` catalogue, the request
//! validator and the guides. Depends on nothing else in this crate.
//!
//! # The wire format
//!
#![doc = include_str!("../../docs/protocol.md")]

mod catalogue;
mod classes;
mod guides;
pub mod keys;
pub mod limits;
mod validate;
mod wire;

pub use catalogue::{
    at_least_one_of, catalogue_json, exactly_one_of, find_tool, is_browser_operation, wait_timeout,
    ArgKind, ArgSpec, FieldKind, FieldSpec, ResultShape, ToolHints, ToolSpec, AGENT_KINDS,
    AGENT_TOOLS, ARTIFACT_VIEWS, ATTENTION_STATES, AT_LEAST_ONE_OF, BROWSER_AFTER_STATES,
    BROWSER_CONTROL_OFF, BROWSER_IDLE, BROWSER_WAIT_STATES, COMMAND_STATES, CONSOLE_LEVELS,
    EXACTLY_ONE_OF, GUIDE_TOPICS, IMAGE_KEY, INSPECT_MODES, INTEGRATIONS, KEY_PATTERN, MAX_CURSOR,
    MAX_MATCHES, NO_CONTROL_PATTERN, NO_NUL_PATTERN, RESULT_KEY,
};
pub use classes::{OperationClass, OPERATION_CLASSES};
pub use guides::{guide, TOOL_GUIDES};
pub use validate::{nearest_name, validate_tool_request, ValidationError};
pub use wire::{
    is_valid_node_id, CanvasToolReply, CanvasToolRequest, IntegrationState, IntegrationStatus,
    ToolIdentity, ToolRequest, ToolResult, ToolSession,
};
