//! Routing table files (being written).
