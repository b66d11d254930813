//! Congestion control for tcp-bth: NewReno, CUBIC and receiver-driven admission
