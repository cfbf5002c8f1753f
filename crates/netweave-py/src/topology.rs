//! Topology: the `Topology` and `ProjectivePlane` classes and the generators.

use netweave_core::topology::{self as nt, ethernet, io, metrics, plane, LinkSpec, Topology};
use numpy::{PyArray1, PyArray2};
use pyo3::prelude::*;

use crate::{err, to_py, NetweaveErrorPy};

/// A network of hosts and switches (see `netweave.topology`).
#[pyclass(name = "Topology", module = "netweave._core", frozen)]
pub(crate) struct PyTopology {
    pub(crate) inner: Topology,
}

#[pymethods]
impl PyTopology {
    #[getter]
    fn name(&self) -> &str {
        self.inner.name()
    }
    #[getter]
    fn family(&self) -> &str {
        self.inner.family()
    }
    #[getter]
    fn params(&self, py: Python<'_>) -> PyResult<PyObject> {
        to_py(py, self.inner.params())
    }
    /// The typed shape as a dict: `{"kind": "lattice", "shape": "torus", "dims": [...],
    /// "hosts_per_router": 1}`, `{"kind": "lsft", "order": 3, ...}`, `{"kind": "generic"}`, …
    #[getter]
    fn structure(&self, py: Python<'_>) -> PyResult<PyObject> {
        to_py(py, self.inner.structure())
    }
    #[getter]
    fn num_hosts(&self) -> usize {
        self.inner.num_hosts()
    }
    #[getter]
    fn num_switches(&self) -> usize {
        self.inner.num_switches()
    }
    #[getter]
    fn num_links(&self) -> usize {
        self.inner.num_links()
    }
    #[getter]
    fn num_nodes(&self) -> usize {
        self.inner.num_nodes()
    }
    /// Node ids of the hosts, in host order.
    #[getter]
    fn hosts<'py>(&self, py: Python<'py>) -> Bound<'py, PyArray1<u32>> {
        PyArray1::from_slice(py, self.inner.hosts())
    }
    /// Node ids of the switches, in switch order.
    #[getter]
    fn switches<'py>(&self, py: Python<'py>) -> Bound<'py, PyArray1<u32>> {
        PyArray1::from_slice(py, self.inner.switches())
    }
    fn label(&self, node: u32) -> PyResult<String> {
        self.check_node(node)?;
        Ok(self.inner.label(node).to_string())
    }
    fn is_host(&self, node: u32) -> PyResult<bool> {
        self.check_node(node)?;
        Ok(self.inner.is_host(node))
    }
    fn radix(&self, node: u32) -> PyResult<u16> {
        self.check_node(node)?;
        Ok(self.inner.radix(node))
    }
    fn coords(&self, node: u32) -> PyResult<Option<Vec<i64>>> {
        self.check_node(node)?;
        Ok(self.inner.coords(node).map(<[i64]>::to_vec))
    }
    /// Links as an `(num_links, 4)` array of `a_node, a_port, b_node, b_port`.
    fn link_array<'py>(&self, py: Python<'py>) -> Bound<'py, PyArray2<u32>> {
        let rows: Vec<Vec<u32>> =
            self.inner.links().iter().map(|l| vec![l.a.node, l.a.port as u32, l.b.node, l.b.port as u32]).collect();
        PyArray2::from_vec2(py, &rows).unwrap_or_else(|_| PyArray2::zeros(py, [0, 4], false))
    }
    /// The link directed channel `channel` belongs to and its direction: `(link, "a->b")` for
    /// channel `2·link`, `(link, "b->a")` for `2·link + 1`.
    fn channel_link(&self, channel: u32) -> PyResult<(u32, &'static str)> {
        self.check_channel(channel)?;
        let forward = self.inner.channel_ends(channel).0 == self.inner.link(channel / 2).a;
        Ok((Topology::channel_link(channel), if forward { "a->b" } else { "b->a" }))
    }
    /// The nodes directed channel `channel` runs from and to.
    fn channel_ends(&self, channel: u32) -> PyResult<(u32, u32)> {
        self.check_channel(channel)?;
        let (from, to) = self.inner.channel_ends(channel);
        Ok((from.node, to.node))
    }
    /// Per-link `(bandwidth_gbps, latency_ns)` as an `(num_links, 2)` array.
    fn link_specs<'py>(&self, py: Python<'py>) -> Bound<'py, PyArray2<f64>> {
        let rows: Vec<Vec<f64>> =
            self.inner.links().iter().map(|l| vec![l.spec.bandwidth_gbps, l.spec.latency_ns]).collect();
        PyArray2::from_vec2(py, &rows).unwrap_or_else(|_| PyArray2::zeros(py, [0, 2], false))
    }
    /// Counts, degrees, diameter and average distance as a dict.
    fn stats(&self, py: Python<'_>) -> PyResult<PyObject> {
        let s = py.allow_threads(|| metrics::stats(&self.inner));
        to_py(py, &s)
    }
    /// The topology in a file format ("json", "ibnet", "anynet", "dot").
    fn to_text(&self, format: &str) -> PyResult<String> {
        let f = io::Format::from_name(format).map_err(err)?;
        io::write(&self.inner, f).map_err(err)
    }
    /// A copy with every link set to this bandwidth and latency.
    fn with_links(&self, bandwidth_gbps: f64, latency_ns: f64) -> PyResult<PyTopology> {
        let mut t = self.inner.clone();
        t.set_all_links(LinkSpec::new(bandwidth_gbps, latency_ns).map_err(err)?);
        Ok(PyTopology { inner: t })
    }
    /// Link layer: "ethernet" (drop-tail port buffers, TCP losses) or "infiniband" (lossless).
    #[getter]
    fn link_layer(&self) -> &'static str {
        self.inner.switching().link_layer.name()
    }
    /// Bytes a switch port queues before it drops (Ethernet), or None on a lossless fabric.
    #[getter]
    fn port_buffer_bytes(&self) -> Option<u64> {
        self.inner.switching().port_buffer_bytes
    }
    /// A copy with this link layer and port buffer (None: the link layer's default, 64 KiB
    /// for Ethernet, none for InfiniBand).
    #[pyo3(signature = (link_layer, port_buffer_bytes=None))]
    fn with_switching(&self, link_layer: &str, port_buffer_bytes: Option<u64>) -> PyResult<PyTopology> {
        let layer = link_layer.parse().map_err(err)?;
        let mut t = self.inner.clone();
        t.set_switching(nt::link_layer::Switching::new(layer, port_buffer_bytes).map_err(err)?);
        Ok(PyTopology { inner: t })
    }
    /// A copy with every link's bandwidth × `factor` and, when given, every link's latency
    /// set to `link_latency_ns` (the fabric an emulation at `factor` of line rate carries).
    #[pyo3(signature = (factor, link_latency_ns=None))]
    fn scaled(&self, factor: f64, link_latency_ns: Option<f64>) -> PyResult<PyTopology> {
        let mut t = self.inner.scaled(factor).map_err(err)?;
        if let Some(ns) = link_latency_ns {
            t.set_link_latency(ns).map_err(err)?;
        }
        Ok(PyTopology { inner: t })
    }
    fn __repr__(&self) -> String {
        format!(
            "<Topology {} : {} hosts, {} switches, {} links>",
            self.inner.name(),
            self.inner.num_hosts(),
            self.inner.num_switches(),
            self.inner.num_links()
        )
    }
}

impl PyTopology {
    fn check_node(&self, node: u32) -> PyResult<()> {
        if (node as usize) < self.inner.num_nodes() {
            Ok(())
        } else {
            Err(NetweaveErrorPy::new_err(format!("node {node} does not exist ({} nodes)", self.inner.num_nodes())))
        }
    }
    fn check_channel(&self, channel: u32) -> PyResult<()> {
        if (channel as usize) < self.inner.num_channels() {
            Ok(())
        } else {
            Err(NetweaveErrorPy::new_err(format!(
                "channel {channel} does not exist ({} channels)",
                self.inner.num_channels()
            )))
        }
    }
}

fn wrap(t: netweave_core::Result<Topology>) -> PyResult<PyTopology> {
    t.map(|inner| PyTopology { inner }).map_err(err)
}

/// Parse a topology file's text in the given format.
#[pyfunction]
fn read_topology(text: &str, format: &str) -> PyResult<PyTopology> {
    let f = io::Format::from_name(format).map_err(err)?;
    wrap(io::read(text, f))
}

/// The format name implied by a file name's extension.
#[pyfunction]
fn format_from_path(path: &str) -> PyResult<String> {
    let f = io::Format::from_path(std::path::Path::new(path)).map_err(err)?;
    Ok(f.name().to_string())
}

#[pyfunction]
#[pyo3(signature = (order, two_sided=false, reduced=false))]
fn latin_square_fat_tree(order: u32, two_sided: bool, reduced: bool) -> PyResult<PyTopology> {
    wrap(nt::lsft::latin_square_fat_tree(order, two_sided, reduced))
}

#[pyfunction]
#[pyo3(signature = (degree, levels=2, two_sided=false))]
fn fat_tree(degree: u32, levels: u32, two_sided: bool) -> PyResult<PyTopology> {
    wrap(nt::fat_tree::fat_tree(degree, levels, two_sided))
}

#[pyfunction]
fn k_ary_n_tree(k: u32, n: u32) -> PyResult<PyTopology> {
    wrap(nt::fat_tree::k_ary_n_tree(k, n))
}

#[pyfunction]
fn pgft(spec: &str) -> PyResult<PyTopology> {
    let spec = nt::fat_tree::PgftSpec::parse(spec).map_err(err)?;
    wrap(nt::fat_tree::pgft(&spec))
}

/// Paper 000's cost table for switches of this degree.
#[pyfunction]
fn cost_table(py: Python<'_>, degree: u32) -> PyResult<PyObject> {
    to_py(py, &nt::fat_tree::cost_table(degree))
}

#[pyfunction]
#[pyo3(signature = (dims, hosts_per_router=1))]
fn mesh(dims: Vec<u32>, hosts_per_router: u32) -> PyResult<PyTopology> {
    wrap(nt::grid::mesh(&dims, hosts_per_router))
}

#[pyfunction]
#[pyo3(signature = (dims, hosts_per_router=1))]
fn torus(dims: Vec<u32>, hosts_per_router: u32) -> PyResult<PyTopology> {
    wrap(nt::grid::torus(&dims, hosts_per_router))
}

#[pyfunction]
#[pyo3(signature = (dim, hosts_per_router=1))]
fn hypercube(dim: u32, hosts_per_router: u32) -> PyResult<PyTopology> {
    wrap(nt::grid::hypercube(dim, hosts_per_router))
}

#[pyfunction]
#[pyo3(signature = (dims, trunking=1, hosts_per_router=1))]
fn hyperx(dims: Vec<u32>, trunking: u32, hosts_per_router: u32) -> PyResult<PyTopology> {
    wrap(nt::grid::hyperx(&dims, trunking, hosts_per_router))
}

#[pyfunction]
#[pyo3(signature = (a, p, h, g=None, arrangement="absolute"))]
fn dragonfly(a: u32, p: u32, h: u32, g: Option<u32>, arrangement: &str) -> PyResult<PyTopology> {
    let arr = nt::dragonfly::GlobalArrangement::from_name(arrangement).map_err(err)?;
    wrap(nt::dragonfly::dragonfly(a, p, h, g, arr))
}

#[pyfunction]
#[pyo3(signature = (switches, degree, hosts_per_switch=1, seed=0))]
fn random_regular(switches: u32, degree: u32, hosts_per_switch: u32, seed: u64) -> PyResult<PyTopology> {
    wrap(nt::random::random_regular(switches, degree, hosts_per_switch, seed))
}

#[pyfunction]
#[pyo3(signature = (switches=16, max_switch_links=4, diameter=6, hosts_per_switch=4, seed=0))]
fn irregular(
    switches: u32,
    max_switch_links: u32,
    diameter: u32,
    hosts_per_switch: u32,
    seed: u64,
) -> PyResult<PyTopology> {
    wrap(nt::random::irregular(switches, max_switch_links, diameter, hosts_per_switch, seed))
}

/// A tree of Ethernet switches: `fanouts[i]` children per switch at depth i, hosts on the edge.
#[pyfunction]
#[pyo3(signature = (fanouts, hosts_per_switch, bandwidths_gbps, latencies_ns, host_bandwidth_gbps, host_latency_ns))]
fn switch_tree(
    fanouts: Vec<u32>,
    hosts_per_switch: u32,
    bandwidths_gbps: Vec<f64>,
    latencies_ns: Vec<f64>,
    host_bandwidth_gbps: f64,
    host_latency_ns: f64,
) -> PyResult<PyTopology> {
    if bandwidths_gbps.len() != fanouts.len() || latencies_ns.len() != fanouts.len() {
        return Err(NetweaveErrorPy::new_err("give one bandwidth and one latency per tree level"));
    }
    let mut levels = Vec::with_capacity(fanouts.len());
    for i in 0..fanouts.len() {
        let link = LinkSpec::new(bandwidths_gbps[i], latencies_ns[i]).map_err(err)?;
        levels.push(ethernet::TreeLevel { fanout: fanouts[i], link });
    }
    let host_link = LinkSpec::new(host_bandwidth_gbps, host_latency_ns).map_err(err)?;
    wrap(ethernet::switch_tree(&levels, hosts_per_switch, host_link))
}

/// Several clusters joined by WAN links; `clusters` is "name:hosts[:gbps],…", "intrigger"
/// (Table 6.1 of paper 004) or "intrigger-6.2[:K]" (the first K clusters of its Table 6.2).
#[pyfunction]
#[pyo3(signature = (clusters, wan_latency_ns=None))]
fn multi_cluster(clusters: &str, wan_latency_ns: Option<f64>) -> PyResult<PyTopology> {
    let specs = match clusters.trim() {
        "intrigger" => ethernet::intrigger(),
        table if table.starts_with("intrigger-6.2") => {
            let all = ethernet::intrigger_table_6_2();
            let count = match table.strip_prefix("intrigger-6.2").unwrap_or("") {
                "" => all.len(),
                rest => match rest.strip_prefix(':').and_then(|k| k.parse::<usize>().ok()) {
                    Some(k) if (1..=all.len()).contains(&k) => k,
                    _ => {
                        return Err(NetweaveErrorPy::new_err(format!(
                            "'{table}': write intrigger-6.2 or intrigger-6.2:K with K in 1..={} (the first K clusters)",
                            all.len()
                        )))
                    }
                },
            };
            all[..count].to_vec()
        }
        _ => ethernet::parse_clusters(clusters).map_err(err)?,
    };
    let mut wan = ethernet::intrigger_wan();
    if let Some(l) = wan_latency_ns {
        wan = LinkSpec::new(wan.bandwidth_gbps, l).map_err(err)?;
    }
    wrap(ethernet::multi_cluster(&specs, wan))
}

/// The projective plane PG(2, q) of paper 000, for any prime power q.
#[pyclass(name = "ProjectivePlane", module = "netweave._core", frozen)]
struct PyProjectivePlane {
    pub(crate) inner: plane::ProjectivePlane,
}

#[pymethods]
impl PyProjectivePlane {
    #[new]
    fn new(order: u32) -> PyResult<Self> {
        Ok(PyProjectivePlane { inner: plane::ProjectivePlane::new(order).map_err(err)? })
    }
    #[getter]
    fn order(&self) -> u32 {
        self.inner.order()
    }
    #[getter]
    fn num_points(&self) -> u32 {
        self.inner.num_points()
    }
    fn point_label(&self, point: u32) -> PyResult<String> {
        self.check(point)?;
        Ok(self.inner.point_label(point))
    }
    fn line_label(&self, line: u32) -> PyResult<String> {
        self.check(line)?;
        Ok(self.inner.line_label(line))
    }
    fn points_of_line(&self, line: u32) -> PyResult<Vec<u32>> {
        self.check(line)?;
        Ok(self.inner.points_of_line(line).to_vec())
    }
    fn lines_through_point(&self, point: u32) -> PyResult<Vec<u32>> {
        self.check(point)?;
        Ok(self.inner.lines_through_point(point).to_vec())
    }
    /// The unique line through two distinct points (closed form).
    fn line_through(&self, a: u32, b: u32) -> PyResult<u32> {
        self.inner.line_through(a, b).map_err(err)
    }
    /// The unique point on two distinct lines.
    fn intersection(&self, l1: u32, l2: u32) -> PyResult<u32> {
        self.inner.intersection(l1, l2).map_err(err)
    }
    /// None when all four axioms hold, else the first violation.
    fn check_axioms(&self) -> Option<String> {
        self.inner.check_axioms().err()
    }
}

impl PyProjectivePlane {
    fn check(&self, i: u32) -> PyResult<()> {
        if i < self.inner.num_points() {
            Ok(())
        } else {
            Err(NetweaveErrorPy::new_err(format!("index {i} is outside 0..{}", self.inner.num_points())))
        }
    }
}

/// Names of the topology file formats, in the order messages list them.
#[pyfunction]
fn topology_formats() -> Vec<&'static str> {
    io::Format::ALL.iter().map(|f| f.name()).collect()
}

/// `(k, m, side)` when the host indices `hosts` (any order) are exactly paper 000's
/// sub-cluster allocation on the LSFT `topology` (slots 0..m of the n x k rectangle of grid
/// leaves on one side, m <= k <= n); None otherwise, and on any other topology.
#[pyfunction]
fn lsft_sub_cluster_of(topology: &PyTopology, hosts: Vec<i64>) -> PyResult<Option<(u32, u32, u32)>> {
    if !matches!(topology.inner.structure(), nt::structure::Structure::Lsft(_)) {
        return Ok(None);
    }
    let lay = nt::lsft::LsftLayout::from_topology(&topology.inner).map_err(err)?;
    let Ok(hosts) = hosts.into_iter().map(u32::try_from).collect::<Result<Vec<u32>, _>>() else {
        return Ok(None);
    };
    Ok(lay.sub_cluster_of(&hosts).map(|s| (s.k, s.m, s.side)))
}

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyTopology>()?;
    m.add_class::<PyProjectivePlane>()?;
    for f in [
        wrap_pyfunction!(read_topology, m)?,
        wrap_pyfunction!(lsft_sub_cluster_of, m)?,
        wrap_pyfunction!(topology_formats, m)?,
        wrap_pyfunction!(format_from_path, m)?,
        wrap_pyfunction!(latin_square_fat_tree, m)?,
        wrap_pyfunction!(fat_tree, m)?,
        wrap_pyfunction!(k_ary_n_tree, m)?,
        wrap_pyfunction!(pgft, m)?,
        wrap_pyfunction!(cost_table, m)?,
        wrap_pyfunction!(mesh, m)?,
        wrap_pyfunction!(torus, m)?,
        wrap_pyfunction!(hypercube, m)?,
        wrap_pyfunction!(hyperx, m)?,
        wrap_pyfunction!(dragonfly, m)?,
        wrap_pyfunction!(random_regular, m)?,
        wrap_pyfunction!(irregular, m)?,
        wrap_pyfunction!(switch_tree, m)?,
        wrap_pyfunction!(multi_cluster, m)?,
    ] {
        m.add_function(f)?;
    }
    Ok(())
}
