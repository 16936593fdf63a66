//! corral-pki: the cluster CA. Mints certificates whose subject carries a name and
//! a role (user, operator, admin, controller, agent), reads that identity back from
//! a peer's certificate, and builds the TLS settings every corral connection uses.
