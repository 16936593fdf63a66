//! Who is calling: the identity in the client certificate (the only source of a
//! caller's name and role) and what it may do through the client API.

use corral_pki::{Identity, Role as CertRole};
use corral_state::ids::{Actor, Role};
use tonic::{Request, Status};

/// An authenticated caller.
#[derive(Debug, Clone)]
pub struct Caller {
    /// From the certificate.
    pub identity: Identity,
}

impl Caller {
    /// Reads the caller from the request's client certificate.
    pub fn of<T>(request: &Request<T>) -> Result<Caller, Status> {
        let identity = corral_pki::identity_of(request)?;
        Ok(Caller { identity })
    }

    /// The caller as a user of the cluster: users, operators and admins act as
    /// themselves; a controller's certificate acts as an administrator (it is the
    /// cluster's own). Node agents are not users.
    pub fn actor(&self) -> Result<Actor, Status> {
        let role = match self.identity.role {
            CertRole::User => Role::User,
            CertRole::Operator => Role::Operator,
            CertRole::Admin | CertRole::Controller => Role::Admin,
            CertRole::Agent => {
                return Err(Status::permission_denied(format!(
                    "'{}' holds a node agent certificate, which may not act as a user; use a user certificate (`corral certs`)",
                    self.identity.name
                )));
            }
        };
        Ok(Actor {
            user: self.identity.name.clone(),
            role,
        })
    }

    /// The caller as an administrator, or `permission_denied`.
    pub fn admin(&self, what: &str) -> Result<Actor, Status> {
        let actor = self.actor()?;
        if actor.is_admin() {
            Ok(actor)
        } else {
            Err(Status::permission_denied(format!(
                "{what} needs the admin role; '{}' is a {}",
                self.identity.name,
                self.identity.role.as_str()
            )))
        }
    }

    /// True when the caller may see and act on `owner`'s jobs.
    pub fn may_act_for(&self, owner: &str) -> bool {
        match self.identity.role {
            CertRole::User => self.identity.name == owner,
            CertRole::Operator | CertRole::Admin | CertRole::Controller => true,
            CertRole::Agent => false,
        }
    }
}
