//! File formats for topologies (being written).
