//! The reading guide of every chart: how to read it, and what a common problem looks like in
//! it (TABARNAC puts such a paragraph before each plot; so do we).

use std::fmt::Write;

pub(crate) struct Guide {
    pub how: &'static str,
    pub problem: &'static str,
}

impl Guide {
    pub(crate) fn html(&self) -> String {
        let mut out = String::from("<div class=\"guide\">");
        let _ = writeln!(
            out,
            "<p><b>How to read this.</b> {}</p><p><b>What a problem looks like.</b> {}</p></div>",
            self.how, self.problem
        );
        out
    }
}

pub(crate) const DISTRIBUTION: Guide = Guide {
    how: "Each row is a thread, each column a range of the object's pages (from its first page \
          on the left); the darker a cell, the more accesses that thread made to those pages, \
          per page. The <i>avg</i> row under the matrix is the mean over all threads of each \
          column (the object's hot pages); the <i>avg</i> column on the right is each thread's \
          accesses per page of the object (who works on it most). White means no access at all.",
    problem: "A diagonal of dark blocks (each thread its own range) is private data: first touch \
              by the same threads places it well. Dark cells in every row of the same columns \
              mean all threads share those pages: no single node can hold them close to \
              everyone, so interleave them or replicate them if they are read-only. A dark band \
              in the <i>avg</i> row is a hotspot: spread it with a cyclic schedule so each node \
              owns part of it. An uneven <i>avg</i> column is work imbalance between threads.",
};

pub(crate) const FIRST_TOUCH: Guide = Guide {
    how: "For each range of pages (same columns as the distribution above), a cross on the row \
          of the thread that touched most of those pages first. Linux places a page on the node \
          of the CPU that first touches it, so this is where the pages went. A faint cross means \
          that thread first-touched only part of the range.",
    problem: "Compare it with the distribution above: the crosses should sit where the dark \
              cells of the same columns are. A single horizontal line (one thread touching \
              everything, typically the main thread initialising the data) under a distribution \
              spread over many threads is the classic first-touch mismatch: every page sits on \
              one node and all the other threads access it remotely. Initialise the object in \
              parallel with the same distribution as the compute loops.",
};

pub(crate) const OBJECT_NODES: Guide = Guide {
    how: "Accesses of each thread (rows) to the pages of this object that sit on each memory \
          node (columns), under the placement of the topology section. A thread's local \
          accesses are those in the column of its own node.",
    problem: "A single dark column accessed by threads of every node means all the object's \
              pages are on one node: the others pay remote latency and that node's memory \
              controller carries all the traffic.",
};

pub(crate) const OBJECT_TIMELINE: Guide = Guide {
    how: "Accesses of each thread (rows) to this object over the run (columns, time from the \
          start of the recording). Darker is more accesses in that interval.",
    problem: "Different threads using the object in different phases (blocks that move from row \
              to row over time) mean its best placement changes during the run: migrate the \
              pages between phases, or interleave when phases are short.",
};

pub(crate) const SIZES: Guide = Guide {
    how: "The size of each of the most accessed objects, in pages, on a logarithmic scale.",
    problem: "A large object with many accesses is where placement matters most; a large object \
              with few accesses does not deserve attention.",
};

pub(crate) const READ_WRITE: Guide = Guide {
    how: "Reads and writes of each of the most accessed objects (accesses of unknown direction, \
          from page-fault samples, in grey).",
    problem: "An object almost only read after initialisation can be replicated, one copy per \
              node; an object that is read and written by many threads cannot, and is a \
              candidate for interleaving.",
};

pub(crate) const NODE_LOAD: Guide = Guide {
    how: "Accesses served by the memory of each node under the placement, and how many pages it \
          holds.",
    problem: "One node serving most accesses while the others are idle is controller \
              imbalance: that node's memory bandwidth limits the program. Interleave the hot \
              objects, or place them by first touch from threads spread over the nodes.",
};

pub(crate) const COMMUNICATION: Guide = Guide {
    how: "Thread × thread: a cell is the amount of data the two threads share (on each block \
          both access, the smaller of their two access counts, summed). The matrix is \
          symmetric and its diagonal empty.",
    problem: "Dark squares along the diagonal are groups of threads that work on the same data: \
              place each group on one node. Dark cells next to the diagonal only are neighbour \
              sharing (stencils, pipelines): keep neighbouring threads on the same node. A \
              uniformly dark matrix is all-to-all sharing, where thread placement cannot help.",
};

pub(crate) const TRAFFIC: Guide = Guide {
    how: "Node × node: a cell is the accesses made by threads running on the node of its row to \
          memory on the node of its column. The diagonal is local traffic, everything else \
          crosses the interconnect.",
    problem: "A dark column is a node whose memory everyone uses (all data first-touched by \
              threads of that node); dark cells off the diagonal are remote accesses, each \
              slower than a local one and competing for the links.",
};

pub(crate) const THREAD_TIMELINE: Guide = Guide {
    how: "Accesses of each thread (rows) over the run (columns), counted on each thread's most \
          used objects. Darker is more accesses.",
    problem: "Phases show as vertical bands. One thread active alone at the start (the other rows \
              white) is a serial initialisation: whatever it touches first lands on its node.",
};

pub(crate) const WHAT_IF: Guide = Guide {
    how: "Each bar is one placement policy simulated on the machine model: its speedup of the \
          modelled memory time over first touch (Linux's default). Online policies react at the end \
          of each window, so their reaction time and the cost of their migrations are in the bar.",
    problem: "A long bar far above first touch means the run's placement leaves time on the table: \
              the findings say which object to change and how. Bars near 1 mean placement is not \
              this program's problem on this machine.",
};
