//! Readers' hold on their generations: the PostgreSQL counterpart of the folder store's
//! `readers.lock`.
//!
//! Every write is a new build (a whole one, or a delta on one), and the graph is read on
//! first use: a server that opened generation N must still find N's rows after any number
//! of newer generations, from this process or another one on the same database. So an
//! open [`Index`](crate::index::Index) holds a session-level *shared* advisory lock on
//! its generation, taken before the generation's rows are read and released when the
//! index is dropped; a writer removes an old generation only when it gets the same key
//! *exclusively* (`pg_try_advisory_xact_lock` in its transaction, released at its
//! commit), and leaves a held one to a later write. A process that dies releases its
//! locks with its sessions.
//!
//! One connection per store holds them all, outside the pool. A session-level lock
//! belongs to the session that took it, so it must stay on one connection for as long as
//! the index lives: holding a pooled connection per open index would take one of the
//! pool's few connections ([`POOL_SIZE`](super::POOL_SIZE)) for the life of every
//! generation a server keeps open (two at a swap, more with readers on older ones), and
//! queries, loads and the writer would wait for checkouts that never come. The locks are
//! counted per generation here, so the connection carries one lock per generation
//! however many indexes share it, and nothing waits on it: the lock is only *tried* (a
//! generation a writer is removing is no longer live, so the load reads the live one
//! again instead).
//!
//! If that connection breaks (a database restart, a proxy's timeout), its locks are gone
//! with it: the next load notices, connects again and takes them all again. In between,
//! a writer may remove a generation an index still uses; its graph then fails to load
//! with "gone; reload", as it did before readers held anything.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use postgres::{Client, NoTls};

use super::{db_err, describe};
use crate::error::{Error, Result};

const TRY_SHARED: &str = "SELECT pg_try_advisory_lock_shared($1)";
/// How long the check that the connection is alive waits for the server.
const CHECK_TIMEOUT: Duration = Duration::from_secs(10);

/// The advisory-lock key readers of `generation` share and a writer removing it takes.
pub(crate) fn key(schema: &str, generation: i64) -> i64 {
    super::writer::lock_key(&format!("hoprag generation {schema} {generation}"))
}

/// The store's readers' locks, on one connection of their own.
pub(crate) struct Readers {
    config: postgres::Config,
    schema: String,
    location: String,
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    /// Connected on the first hold.
    client: Option<Client>,
    /// Open indexes per generation; a generation is locked while its count is above 0.
    held: HashMap<i64, usize>,
}

/// A generation held open; released on drop.
pub(crate) struct Hold {
    readers: Arc<Readers>,
    generation: i64,
}

impl Drop for Hold {
    fn drop(&mut self) {
        self.readers.release(self.generation);
    }
}

impl Readers {
    pub(crate) fn new(config: postgres::Config, schema: &str, location: &str) -> Readers {
        Readers { config, schema: schema.into(), location: location.into(), state: Mutex::default() }
    }

    /// A hold on `generation`, or `None` when a writer is removing it (it holds the key
    /// exclusively until its commit, which makes a newer generation live).
    pub(crate) fn hold(self: &Arc<Self>, generation: i64) -> Result<Option<Hold>> {
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        let State { client, held } = &mut *state;
        let client = self.connected(client, held)?;
        match held.get_mut(&generation) {
            Some(count) => *count += 1,
            None => {
                let locked: bool = client
                    .query_one(TRY_SHARED, &[&key(&self.schema, generation)])
                    .map_err(db_err(&self.location, "holding the generation open"))?
                    .get(0);
                if !locked {
                    return Ok(None);
                }
                held.insert(generation, 1);
            }
        }
        Ok(Some(Hold { readers: self.clone(), generation }))
    }

    /// The connection, checked alive (one round trip: a session the server ended is only
    /// noticed when used). A broken one is replaced, and the locks of every held
    /// generation are taken again on the new one.
    fn connected<'c>(&self, client: &'c mut Option<Client>, held: &HashMap<i64, usize>) -> Result<&'c mut Client> {
        let alive = client.as_mut().is_some_and(|c| match c.is_valid(CHECK_TIMEOUT) {
            Ok(()) => true,
            Err(e) => {
                log::warn!(
                    "{}: the connection holding readers' locks broke ({}); connecting again",
                    self.location,
                    describe(&e)
                );
                false
            }
        });
        if !alive {
            *client = None;
            let mut new = self.config.connect(NoTls).map_err(|e| {
                Error::index(&self.location, format!("connecting to hold the generation open: {}", describe(&e)))
            })?;
            let err = db_err(&self.location, "holding the generation open");
            for &g in held.keys() {
                // Removed meanwhile (its locks were gone): its index finds its graph gone,
                // as before readers held anything.
                let again: bool = new.query_one(TRY_SHARED, &[&key(&self.schema, g)]).map_err(&err)?.get(0);
                if !again {
                    log::warn!("{}: generation {g}, open here, is being removed", self.location);
                }
            }
            *client = Some(new);
        }
        Ok(client.as_mut().expect("connected above"))
    }

    fn release(&self, generation: i64) {
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        let Some(count) = state.held.get_mut(&generation) else { return };
        *count -= 1;
        if *count > 0 {
            return;
        }
        state.held.remove(&generation);
        if let Some(client) = state.client.as_mut().filter(|c| !c.is_closed()) {
            // On a broken connection the lock went with the session.
            let unlock = "SELECT pg_advisory_unlock_shared($1)";
            if let Err(e) = client.execute(unlock, &[&key(&self.schema, generation)]) {
                log::debug!("{}: releasing generation {generation}: {}", self.location, describe(&e));
            }
        }
    }
}
