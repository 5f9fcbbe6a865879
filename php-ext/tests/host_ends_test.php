<?php
// A transaction the script ends itself, without the queue (its own COMMIT or
// ROLLBACK through SQLite3::exec() or PDO::exec(), a script that commits, a
// COMMIT inside transaction()'s function), gives the writer turn back when it
// ends: another process's flock(LOCK_EX|LOCK_NB) on <db>.writer-lock succeeds
// within 10 ms of that COMMIT while the first process just sleeps, and the
// first process's next begin() works. A COMMIT that SQLite refuses keeps the
// turn while the transaction stays open. And the queue's own statements never
// pass through a SQLite3 or PDO subclass that overrides exec() or query().
require __DIR__ . '/lib.php';

$dir = tmpdir();
$path = make_db( $dir );

/** How long after its COMMIT returned another process may still find the lock held. */
const HANDBACK_LIMIT = 0.010;

function host_end( $path, $mode )
{
    $writer = new Child( php_cmd( __DIR__ . '/helpers/host_end.php', array( $path, $mode ) ) );
    check_same( 'began', $writer->line(), "$mode: the writer" );
    $watcher = new Child( php_cmd( __DIR__ . '/helpers/lock_wait_free.php', array( $path . '.writer-lock' ), false ) );
    try
    {
        check_same( 'held', $watcher->line(), "$mode: the other process while the transaction is open" );
        $writer->send( "end\n" );
        $ended = $writer->line();
        check( preg_match( '/^ended (\S+) (\S+) (\d)$/', $ended, $m ) === 1, "$mode: the writer said: $ended" );
        try
        {
            $free = $watcher->line( 5.0 );
        }
        catch ( TestFailure $e )
        {
            $free = 'no answer';
        }
        check( preg_match( '/^free (\S+)$/', $free, $f ) === 1,
               "$mode: another process found the writer lock still held 5 s after the script's own transaction end, while the writer slept ($free)" );
    }
    finally
    {
        if ( $watcher->code === null )
        {
            posix_kill( $watcher->pid, SIGKILL );
            $watcher->wait();
        }
    }
    $late = (float)$f[1] - (float)$m[2];
    check( $late <= HANDBACK_LIMIT,
           sprintf( '%s: another process got the writer lock %.1f ms after the COMMIT returned (limit %.0f ms)', $mode, $late * 1000, HANDBACK_LIMIT * 1000 ) );
    check_same( '0', $m[3], "$mode: holding() after the script ended the transaction" );
    $writer->send( "next\n" );
    check_same( 'next ok', $writer->line(), "$mode: the next begin() and commit()" );
    check_same( 0, $writer->wait(), "$mode: the writer's exit code ({$writer->err})" );
}

foreach ( array(
    'sqlite3-commit' => "SQLite3::exec('COMMIT')",
    'sqlite3-rollback' => "SQLite3::exec('ROLLBACK')",
    'sqlite3-script' => "SQLite3::exec() of a script that ends with COMMIT",
    'pdo-commit' => "PDO::exec('COMMIT')",
    'pdo-rollback' => "PDO::exec('ROLLBACK')",
    'transaction-commit' => "a COMMIT inside transaction()'s function",
) as $mode => $what )
{
    t( "after begin(), $what gives the writer turn back at once to another process; the next begin() works", function () use ( $path, $mode ) {
        host_end( $path, $mode );
    } );
}

t( 'a COMMIT of the script\'s own that SQLite refuses keeps the writer turn while the transaction stays open; the COMMIT that then succeeds gives it back', function () use ( $dir ) {
    $path = "$dir/fk.db";
    $db = new SQLite3( $path );
    $db->exec( 'PRAGMA journal_mode = wal' );
    $db->exec( 'PRAGMA foreign_keys = ON' );
    $db->exec( 'CREATE TABLE parent (id INTEGER PRIMARY KEY)' );
    $db->exec( 'CREATE TABLE child (p INTEGER REFERENCES parent(id) DEFERRABLE INITIALLY DEFERRED)' );
    foreach ( array( 'SQLite3' => $db, 'PDO' => new PDO( "sqlite:$path" ) ) as $kind => $conn )
    {
        $conn->exec( 'PRAGMA foreign_keys = ON' );
        $q = new WriterLock\Queue( $path );
        $q->begin( $conn );
        $conn->exec( 'INSERT INTO child VALUES (7)' );
        try
        {
            $ok = @$conn->exec( 'COMMIT' );
        }
        catch ( PDOException $e )
        {
            $ok = false;
        }
        check( $ok === false, "$kind: SQLite accepted a COMMIT that breaks a deferred foreign key" );
        check( $q->holding(), "$kind: holding() after the refused COMMIT" );
        check_lock( $path, 'held', "$kind: after a COMMIT SQLite refused, the transaction still open" );
        $conn->exec( 'INSERT INTO parent VALUES (7)' );
        check( $conn->exec( 'COMMIT' ) !== false, "$kind: the COMMIT after the fix failed" );
        check( !$q->holding(), "$kind: holding() after the COMMIT succeeded" );
        check_lock( $path, 'free', "$kind: after the script's own COMMIT succeeded" );
        $conn->exec( 'DELETE FROM child' );
        $conn->exec( 'DELETE FROM parent' );
    }
} );

class LoggingSQLite3 extends SQLite3
{
    public $seen = array();
    function exec( string $query ): bool { $this->seen[] = "exec: $query"; return parent::exec( $query ); }
    function query( string $query ): SQLite3Result|false { $this->seen[] = "query: $query"; return parent::query( $query ); }
    function querySingle( string $query, bool $entireRow = false ): mixed { $this->seen[] = "querySingle: $query"; return parent::querySingle( $query, $entireRow ); }
    function busyTimeout( int $milliseconds ): bool { $this->seen[] = "busyTimeout: $milliseconds"; return parent::busyTimeout( $milliseconds ); }
}

class LoggingPDO extends PDO
{
    public $seen = array();
    function exec( string $statement ): int|false { $this->seen[] = "exec: $statement"; return parent::exec( $statement ); }
    function query( string $query, ?int $fetchMode = null, mixed ...$fetchModeArgs ): PDOStatement|false { $this->seen[] = "query: $query"; return parent::query( $query, $fetchMode, ...$fetchModeArgs ); }
    function prepare( string $query, array $options = array() ): PDOStatement|false { $this->seen[] = "prepare: $query"; return parent::prepare( $query, $options ); }
}

t( 'a SQLite3 or PDO subclass overriding exec(), query() and the rest sees none of the queue\'s own statements, only the one queued through exec()', function () use ( $path ) {
    foreach ( array( 'SQLite3' => new LoggingSQLite3( $path ), 'PDO' => new LoggingPDO( "sqlite:$path" ) ) as $kind => $conn )
    {
        $q = WriterLock\Queue::forConnection( $conn );
        $q->begin( $conn );
        $q->commit( $conn );
        $q->begin( $conn, 3 );
        $q->rollback( $conn );
        $q->transaction( $conn, function ( $c ) {} );
        $q->exec( $conn, "INSERT INTO pub (worker) VALUES ('queued')", 5 );
        $q->acquire();
        $q->release();
        check_same( array( "exec: INSERT INTO pub (worker) VALUES ('queued')" ), $conn->seen, "$kind: what the subclass saw" );
    }
} );

t( 'the hooks last only for the queue\'s own transaction: a later COMMIT of the script ends no turn taken with acquire(), after commit() or after a Queue object freed inside its transaction', function () use ( $dir ) {
    $path = "$dir/hooks.db";
    $db = new SQLite3( $path );
    $db->exec( 'CREATE TABLE t (x)' );
    $q = new WriterLock\Queue( $path );
    $q->begin( $db );
    $q->commit( $db );
    $q->acquire();
    $db->exec( 'BEGIN IMMEDIATE' );
    $db->exec( 'INSERT INTO t VALUES (1)' );
    $db->exec( 'COMMIT' );
    check( $q->holding(), 'a COMMIT after commit() ended the turn acquire() took' );
    check_lock( $path, 'held', 'under acquire(), after a COMMIT of the script' );
    $q->release();
    // A second object on the same database, freed inside its transaction: its turn goes
    // back then; the transaction stays open until the script commits it.
    $other = new WriterLock\Queue( $path );
    $other->begin( $db );
    $db->exec( 'INSERT INTO t VALUES (2)' );
    unset( $other );
    $q->acquire();
    $db->exec( 'COMMIT' );
    check( $q->holding(), 'the COMMIT of a transaction whose Queue object was freed ended the turn acquire() took since' );
    check_lock( $path, 'held', 'under acquire(), after that COMMIT' );
    $q->release();
    check_lock( $path, 'free', 'after release()' );
    $q->begin( $db );
    $q->commit( $db );
    check_same( 2, $db->querySingle( 'SELECT COUNT(*) FROM t' ), 'rows' );
} );
