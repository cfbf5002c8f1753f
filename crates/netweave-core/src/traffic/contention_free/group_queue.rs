//! The stage scheduler's queue of groups by remaining cost: an indexed binary max-heap, so a
//! group's key is lowered in place instead of pushing a fresh entry and skipping stale ones
//! (a 1,024-host all-to-all would otherwise churn millions of entries through the heap).

/// Groups keyed by `(remaining cost, lowest group first)`; the top is the next stage's group.
pub(super) struct GroupQueue {
    heap: Vec<u32>,
    /// Position of each group in `heap`, `u32::MAX` when absent.
    pos: Vec<u32>,
    key: Vec<u64>,
}

impl GroupQueue {
    /// Every group with a positive `left` count, keyed by its `remaining` cost.
    pub fn new(remaining: &[u64], left: &[u32]) -> GroupQueue {
        let mut q = GroupQueue { heap: Vec::new(), pos: vec![u32::MAX; remaining.len()], key: remaining.to_vec() };
        for g in (0..remaining.len() as u32).filter(|&g| left[g as usize] > 0) {
            q.pos[g as usize] = q.heap.len() as u32;
            q.heap.push(g);
        }
        for i in (0..q.heap.len() / 2).rev() {
            q.down(i);
        }
        q
    }

    /// The group with the largest key (ties: the lowest group).
    pub fn top(&self) -> Option<u32> {
        self.heap.first().copied()
    }

    /// Lower `g`'s key to `key`.
    pub fn lower(&mut self, g: u32, key: u64) {
        self.key[g as usize] = key;
        let i = self.pos[g as usize];
        if i != u32::MAX {
            self.down(i as usize);
        }
    }

    /// Take `g` out (its last task is scheduled).
    pub fn remove(&mut self, g: u32) {
        let i = self.pos[g as usize];
        if i == u32::MAX {
            return;
        }
        let last = self.heap.pop().expect("a present group is in the heap");
        self.pos[g as usize] = u32::MAX;
        if last != g {
            self.heap[i as usize] = last;
            self.pos[last as usize] = i;
            self.down(i as usize);
            self.up(i as usize);
        }
    }

    fn before(&self, a: u32, b: u32) -> bool {
        (self.key[a as usize], std::cmp::Reverse(a)) > (self.key[b as usize], std::cmp::Reverse(b))
    }

    fn swap(&mut self, i: usize, j: usize) {
        self.heap.swap(i, j);
        self.pos[self.heap[i] as usize] = i as u32;
        self.pos[self.heap[j] as usize] = j as u32;
    }

    fn down(&mut self, mut i: usize) {
        loop {
            let (l, r) = (2 * i + 1, 2 * i + 2);
            let mut best = i;
            if l < self.heap.len() && self.before(self.heap[l], self.heap[best]) {
                best = l;
            }
            if r < self.heap.len() && self.before(self.heap[r], self.heap[best]) {
                best = r;
            }
            if best == i {
                return;
            }
            self.swap(i, best);
            i = best;
        }
    }

    fn up(&mut self, mut i: usize) {
        while i > 0 {
            let parent = (i - 1) / 2;
            if !self.before(self.heap[i], self.heap[parent]) {
                return;
            }
            self.swap(i, parent);
            i = parent;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// Against a plain scan: the top is always the largest key, lowest group on ties.
        #[test]
        fn top_is_the_largest_remaining(keys in prop::collection::vec(0u64..20, 1..40), steps in prop::collection::vec((0usize..40, 0u64..20), 0..80)) {
            let left = vec![1u32; keys.len()];
            let mut q = GroupQueue::new(&keys, &left);
            let mut key = keys.clone();
            let mut present = vec![true; keys.len()];
            for (g, k) in steps {
                let g = g % keys.len();
                if k % 5 == 0 {
                    q.remove(g as u32);
                    present[g] = false;
                } else if present[g] && k <= key[g] {
                    q.lower(g as u32, k);
                    key[g] = k;
                }
                let want = (0..keys.len()).filter(|&g| present[g]).max_by_key(|&g| (key[g], std::cmp::Reverse(g)));
                prop_assert_eq!(q.top().map(|g| g as usize), want);
            }
        }
    }
}
