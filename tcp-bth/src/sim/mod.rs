pub mod link;
pub use link::*;
