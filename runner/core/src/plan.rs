//! What every suite's plan shares: `--shard I/N`, a deterministic slice by request id,
//! so that N shard runs cover a plan exactly once (the protocol's seeds are in
//! [`crate::protocol`]).

use std::fmt;
use std::str::FromStr;
use thiserror::Error;

#[derive(Debug, Error, PartialEq)]
#[error("--shard {0:?}: expected I/N with 0 <= I < N, e.g. 0/4")]
pub struct BadShard(pub String);

/// One slice of the plan: requests whose id falls in bucket `index` of `count`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub struct Shard {
    pub index: u32,
    pub count: u32,
}

impl Shard {
    /// Whether a request id (hex SHA-256) belongs to this shard.
    pub fn contains(&self, request_id: &str) -> bool {
        let head = request_id
            .get(..16)
            .and_then(|h| u64::from_str_radix(h, 16).ok());
        // Ids that are not hex (none are, by construction) go by a byte sum instead of panicking.
        let bucket = head.unwrap_or_else(|| request_id.bytes().map(u64::from).sum());
        bucket % u64::from(self.count) == u64::from(self.index)
    }
}

impl FromStr for Shard {
    type Err = BadShard;
    fn from_str(s: &str) -> Result<Self, BadShard> {
        let bad = || BadShard(s.to_string());
        let (i, n) = s.split_once('/').ok_or_else(bad)?;
        let (index, count): (u32, u32) = (
            i.trim().parse().map_err(|_| bad())?,
            n.trim().parse().map_err(|_| bad())?,
        );
        if count == 0 || index >= count {
            return Err(bad());
        }
        Ok(Shard { index, count })
    }
}

impl fmt::Display for Shard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.index, self.count)
    }
}
