//! The list envelope: `{"data": [...], "has_more": false, "object": "list"}`.

use serde::{Deserialize, Serialize};

/// Always `list`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub enum ListObject {
    /// `list`.
    #[default]
    List,
}

/// A page of resources, oldest or newest first as the route says.
///
/// The members are declared (and sent) in the order the server has always
/// sent them: sorted by name.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct List<T> {
    /// The resources of this page.
    pub data: Vec<T>,
    /// Whether another page follows. `false` where a route lists everything.
    pub has_more: bool,
    /// Always `list`.
    pub object: ListObject,
}

impl<T> List<T> {
    /// A list of everything there is (`has_more` false).
    pub fn all(data: Vec<T>) -> Self {
        Self::page(data, false)
    }

    /// One page of a longer list.
    pub fn page(data: Vec<T>, has_more: bool) -> Self {
        Self {
            data,
            has_more,
            object: ListObject::List,
        }
    }
}
