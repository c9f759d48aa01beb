//! Cursor pagination of the lists a shop reads (payments, refunds): newest
//! first by `(created_at, id)`, with keyset cursors, never offsets, so a
//! walk through the pages neither skips nor repeats a row while rows are
//! inserted meanwhile.

/// The most rows one page may ask for.
pub const MAX_PAGE_LIMIT: u32 = 100;

/// How many rows a page holds at most: `1..=`[`MAX_PAGE_LIMIT`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct PageLimit(u32);

impl PageLimit {
    /// The default page size (10).
    pub const DEFAULT: Self = Self(10);

    /// A limit of `n` rows; `None` unless `1 <= n <= MAX_PAGE_LIMIT`.
    pub fn new(n: u32) -> Option<Self> {
        (1..=MAX_PAGE_LIMIT).contains(&n).then_some(Self(n))
    }

    /// The number of rows.
    pub fn get(self) -> u32 {
        self.0
    }
}

impl Default for PageLimit {
    fn default() -> Self {
        Self::DEFAULT
    }
}

/// Where a page starts, named by the id of a row of the list.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum Cursor<Id> {
    /// The newest rows.
    #[default]
    Newest,
    /// The rows just older than this one (`starting_after`).
    After(Id),
    /// The rows just newer than this one (`ending_before`), still returned
    /// newest first.
    Before(Id),
}

/// One page to read.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct PageRequest<Id> {
    /// At most this many rows.
    pub limit: PageLimit,
    /// Where the page starts. A cursor that is not a row of the shop's
    /// list (another shop's, or unknown) is
    /// [`StoreError::UnknownCursor`](super::StoreError::UnknownCursor).
    pub cursor: Cursor<Id>,
}

/// One page of a list, newest first.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Page<T> {
    /// The rows, newest first.
    pub items: Vec<T>,
    /// Whether more rows lie beyond this page in the direction it was read
    /// (older for [`Cursor::Newest`] and [`Cursor::After`], newer for
    /// [`Cursor::Before`]).
    pub has_more: bool,
}

impl<T> Page<T> {
    /// The page from up to `limit + 1` rows read in the direction of the
    /// cursor (newest first, or oldest first for [`Cursor::Before`]): the
    /// extra row only says that there are more. For the stores.
    pub fn from_probe<Id>(mut rows: Vec<T>, request: &PageRequest<Id>) -> Self {
        let limit = usize::try_from(request.limit.get()).unwrap_or(usize::MAX);
        let has_more = rows.len() > limit;
        rows.truncate(limit);
        if matches!(request.cursor, Cursor::Before(_)) {
            rows.reverse();
        }
        Self {
            items: rows,
            has_more,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limits_are_bounded() {
        assert_eq!(PageLimit::new(0), None);
        assert_eq!(PageLimit::new(101), None);
        assert_eq!(PageLimit::new(100).map(PageLimit::get), Some(100));
        assert_eq!(PageLimit::default().get(), 10);
    }

    #[test]
    fn a_probe_row_says_there_are_more_and_before_pages_turn_around() {
        let request = PageRequest::<u8> {
            limit: PageLimit::new(2).unwrap_or_default(),
            cursor: Cursor::Before(9),
        };
        let page = Page::from_probe(vec![1, 2, 3], &request);
        assert_eq!(page.items, vec![2, 1]);
        assert!(page.has_more);
        let page = Page::from_probe(
            vec![5, 4],
            &PageRequest::<u8> {
                limit: PageLimit::new(2).unwrap_or_default(),
                cursor: Cursor::Newest,
            },
        );
        assert_eq!(page.items, vec![5, 4]);
        assert!(!page.has_more);
    }
}
