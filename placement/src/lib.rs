//! Memory regions, posted receive buffers and direct placement of tcp_bth segments
