//! TCP stream reassembly: placeholder until it lands.
