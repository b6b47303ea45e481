//! Every lock's rank: `docs/DESIGN.md`'s "Lock order", as numbers. The tens
//! are its steps (1 to 9); within a step a higher number is taken under a
//! lower one. Locks of one number are never nested. A lock added to the
//! crate gets its constant here and its row in DESIGN's table.

use super::Rank;

// Step 1: a session's own lock, then the web page's cursor or reviewed.
pub const MCP_TARGET: Rank = Rank::new(10, "serve::mcp::Session::target");
pub const STREAM_TOOL: Rank = Rank::new(10, "serve::stream::ToolLines::tool");
pub const WEB_MODEL: Rank = Rank::new(10, "web::App::model");
pub const WEB_CURSOR: Rank = Rank::new(11, "web::App::cursor");
pub const WEB_REVIEWED: Rank = Rank::new(11, "web::App::reviewed");

// Step 2: the HTTP registry's lock of one store, its open table, one open
// store's id index, then the store's other locks.
pub const REGISTRY_STORE: Rank = Rank::new(20, "http::registry::Registry::store_lock");
pub const REGISTRY_OPEN: Rank = Rank::new(21, "http::registry::Registry::open");
pub const STORE_IDS: Rank = Rank::new(22, "http::registry::OpenStore::ids");
pub const STORE_LAST_USED: Rank = Rank::new(23, "http::registry::OpenStore::last_used");
pub const HOSTED_MOUNTS: Rank = Rank::new(23, "fuse::Hosted::mounts");
pub const STORE_SERVER: Rank = Rank::new(23, "http::registry::OpenStore::server");
pub const SOCKET_CLIENTS: Rank = Rank::new(24, "serve::socket::Clients");
pub const SOCKET_LAST_CLIENT: Rank = Rank::new(25, "serve::socket::SocketServer::last_client");
pub const SOCKET_HUB: Rank = Rank::new(26, "serve::hub::Hub::listening");

// Step 3: the doors' leaves.
pub const REGISTRY_METAS: Rank = Rank::new(30, "http::registry::Registry::metas");
pub const REGISTRY_OPENING: Rank = Rank::new(30, "http::registry::Registry::opening");
pub const REGISTRY_CLOSING: Rank = Rank::new(30, "http::registry::Registry::close_all");
pub const TOKENS: Rank = Rank::new(30, "http::tokens::Tokens::cached");
pub const RATE_BUCKETS: Rank = Rank::new(30, "http::limits::Rates::buckets");
pub const TOKEN_SLOTS: Rank = Rank::new(30, "http::limits::TokenSlots::held");
pub const HTTP_MCP_SESSIONS: Rank = Rank::new(30, "http::mcp::Sessions::map");
pub const WEB_LOGINS: Rank = Rank::new(30, "http::web::WebDoor::logins");
pub const WEB_RECENT_LOGINS: Rank = Rank::new(30, "http::web::WebDoor::recent");
pub const WEB_PAGES: Rank = Rank::new(30, "http::web::WebDoor::pages");
pub const WEB_SESSION_LOGIN: Rank = Rank::new(30, "web::session::Sessions::logins");
pub const WEB_SESSION_MAP: Rank = Rank::new(31, "web::session::Sessions::map");
pub const PIPELINE_BUDGET: Rank = Rank::new(30, "serve::pipeline::Budget::state");
pub const MOUNT_DIRS: Rank = Rank::new(30, "fuse::listings::Listings::inner");
pub const PROCESS_NAMES: Rank = Rank::new(30, "fuse::request::process_of");
pub const ATTR_LAST: Rank = Rank::new(30, "fuse::attr::once_a_minute");
pub const FLUSHER: Rank = Rank::new(30, "fuse::flusher::Flusher::state");
pub const HTTP_PENDING: Rank = Rank::new(30, "listen::pending::Pending::queue");
pub const SEARCH: Rank = Rank::new(32, "search::Search::state");

// Step 4: one journal's pool jobs (the shutdown waits for them), whoever
// commits a batch, then a shared store's connection.
pub const JOURNAL_JOB: Rank = Rank::new(39, "journal::group::GroupCommit::job");
pub const LEADER: Rank = Rank::new(40, "journal::group::GroupCommit::leader");
pub const DB_CONN: Rank = Rank::new(41, "shared::db::Db::conn");
// Step 4b: the plain files' watcher, taken before the tree it changes.
pub const OUTSIDE: Rank = Rank::new(45, "outside::Outside::state");

// Step 5: the store's tree, then its side locks (`unsaved` then `lost`).
pub const TREE: Rank = Rank::new(50, "store::Store::tree");
pub const OBSERVERS: Rank = Rank::new(51, "store::Store::observers");
pub const PINS: Rank = Rank::new(51, "store::Store::pins");
pub const UNSAVED: Rank = Rank::new(51, "store::Store::unsaved");
pub const USED: Rank = Rank::new(51, "store::Store::used");
pub const FRESH: Rank = Rank::new(51, "store::Store::fresh");
pub const NOTES: Rank = Rank::new(51, "store::Store::notes");
pub const LOST: Rank = Rank::new(52, "store::Store::lost");

// Step 6: one rewrite (compaction, redaction) at a time; one checkpoint
// step of a journal at a time.
pub const COMPACTING: Rank = Rank::new(59, "journal::upkeep::Upkeep::compacting");
pub const REWRITING: Rank = Rank::new(60, "journal::upkeep::Upkeep::rewriting");
pub const CHECKPOINT_TURNS: Rank = Rank::new(61, "journal::checkpoint::Checkpointer::turns");

// Step 7: the journal's state, then what it guards beside it.
pub const STATE: Rank = Rank::new(70, "journal::writer::Core::state");
pub const STUCK: Rank = Rank::new(71, "journal::handoff::Handoff::stuck");
pub const STUCK_REASONS: Rank = Rank::new(72, "journal::handoff::Handoff::stuck_reasons");
pub const COMPACT: Rank = Rank::new(71, "journal::upkeep::Upkeep::compact");
pub const BEHIND: Rank = Rank::new(71, "journal::owed::Owed::behind");
pub const OWED_BATCHES: Rank = Rank::new(71, "journal::owed::Owed::batches");
pub const CHECKPOINTER: Rank = Rank::new(71, "journal::handoff::Handoff::checkpointer");
pub const DB_CONFIRMED: Rank = Rank::new(71, "shared::db::Db::confirmed");
pub const DB_UNKNOWN: Rank = Rank::new(71, "shared::db::Db::unknown");

// Step 8: the journal's queue, then what settles.
pub const QUEUE: Rank = Rank::new(80, "journal::group::GroupCommit::queue");
pub const UNSETTLED: Rank = Rank::new(81, "journal::upstream::Sharing::unsettled");
pub const TAINT: Rank = Rank::new(81, "journal::owed::Refusals::taint");
pub const CHECKPOINT_INBOX: Rank = Rank::new(85, "journal::checkpoint::Checkpointer::inbox");
pub const CHECKPOINT_NEXT: Rank = Rank::new(86, "journal::checkpoint::Checkpointer::next");
pub const FOLLOW_TURN: Rank = Rank::new(87, "shared::follow::Tracked::turn");

// Step 9: leaves everywhere.
pub const OUTCOME: Rank = Rank::new(90, "store::change::Part::outcome");
pub const INVALIDATOR: Rank = Rank::new(90, "fuse::invalidate::Invalidator::queue");
pub const RECOVERY: Rank = Rank::new(90, "journal::owed::Refusals::recovery");
pub const DB_DISOWNED: Rank = Rank::new(90, "shared::db::Db::disowned");
pub const DATABASES: Rank = Rank::new(90, "shared::database::of");
pub const DATABASE_WRITERS: Rank = Rank::new(90, "shared::database::Database::writers");
pub const DATABASE_READERS: Rank = Rank::new(90, "shared::database::Database::readers");
pub const DATABASE_FOLLOWED: Rank = Rank::new(90, "shared::database::Database::followed");
pub const FOLLOW_FIRST: Rank = Rank::new(90, "shared::follow::Tracked::first");
pub const KNOWN: Rank = Rank::new(90, "persist::known::Known::map");
pub const WRITERS: Rank = Rank::new(90, "outside::writers::Group::recent");
pub const INOTIFY_HUB: Rank = Rank::new(91, "outside::watch::HUB");
pub const INOTIFY_EVENTS: Rank = Rank::new(91, "outside::watch::Hub::inner");
pub const MEM_DISK: Rank = Rank::new(90, "persist::storage::mem::MemDisk::state");
pub const POOL_QUEUE: Rank = Rank::new(90, "pool::Pool::queue");
pub const CATALOG_CONNS: Rank = Rank::new(90, "http::catalog_pg::PgCatalog::idle");
pub const REMOTE_DIRTY: Rank = Rank::new(90, "remote::Inner::dirty");
pub const API_KEY: Rank = Rank::new(90, "transfer::api::Api::key");
pub const VERSIONS_CHANGED: Rank = Rank::new(90, "http::changed::Changed::count");
