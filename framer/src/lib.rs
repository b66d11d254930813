//! Work requests to tcp_bth segments and back
