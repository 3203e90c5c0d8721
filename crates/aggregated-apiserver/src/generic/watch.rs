//! Watch streams: per-resource event fan-out of the writes made through this server, bookmarks and timeouts.
