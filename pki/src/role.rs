//! The role a certificate grants, carried in its subject's Organizational Unit:
//! what its holder may do in the cluster.

use std::fmt;
use std::str::FromStr;

/// What a certificate's holder is in the cluster.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Role {
    /// Submits and manages their own jobs.
    User,
    /// Also manages nodes and other users' jobs.
    Operator,
    /// May change anything, including accounts and cluster configuration.
    Admin,
    /// A controller replica: speaks the peer protocol and dispatches to agents.
    Controller,
    /// A node agent: runs jobs and reports on its node.
    Agent,
}

impl Role {
    /// Every role, in declaration order.
    pub const ALL: [Role; 5] = [
        Role::User,
        Role::Operator,
        Role::Admin,
        Role::Controller,
        Role::Agent,
    ];

    /// The name written into certificates: "user", "operator", "admin",
    /// "controller" or "agent".
    pub fn as_str(self) -> &'static str {
        match self {
            Role::User => "user",
            Role::Operator => "operator",
            Role::Admin => "admin",
            Role::Controller => "controller",
            Role::Agent => "agent",
        }
    }
}

impl fmt::Display for Role {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A role name that is not one of corral's roles.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown role '{0}': expected user, operator, admin, controller or agent")]
pub struct UnknownRole(pub String);

impl FromStr for Role {
    type Err = UnknownRole;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Role::ALL
            .into_iter()
            .find(|role| role.as_str() == s)
            .ok_or_else(|| UnknownRole(s.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_role_round_trips_through_its_name() {
        for role in Role::ALL {
            assert_eq!(role.as_str().parse::<Role>(), Ok(role));
            assert_eq!(role.to_string(), role.as_str());
        }
    }

    #[test]
    fn unknown_and_differently_cased_names_are_refused() {
        assert_eq!("root".parse::<Role>(), Err(UnknownRole("root".into())));
        assert!("Admin".parse::<Role>().is_err());
        assert!("".parse::<Role>().is_err());
    }
}
