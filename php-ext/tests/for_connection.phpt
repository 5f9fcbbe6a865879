--TEST--
Queue::forConnection() queues on the connection's own database file; a relative path is resolved when the queue is made; a queue of another database is refused; the caller's busy timeout is put back
--EXTENSIONS--
pdo_sqlite
sqlite3
writerlock
--FILE--
<?php
require __DIR__ . '/lib.php';
$dir = tmpdir();
mkdir( "$dir/site" );
mkdir( "$dir/elsewhere" );
$path = make_db( "$dir/site" );

echo "-- forConnection() of SQLite3 and PDO, opened by a relative path\n";
chdir( "$dir/site" );
$sqlite = new SQLite3( 'site.db' );
$pdo = new PDO( 'sqlite:site.db' );
foreach ( array( $sqlite, $pdo ) as $db )
{
    $q = WriterLock\Queue::forConnection( $db );
    chdir( "$dir/elsewhere" );
    $q->begin( $db, 5 );
    $other = probe_begin( $path, 0.2 );             // another process, by the absolute path
    echo get_class( $db ), ': ', $other['ok'] ? "not queued on the database's lock file\n" : "queued on site.db.writer-lock\n";
    $q->rollback( $db );
    chdir( "$dir/site" );
}
var_dump( file_exists( "$dir/elsewhere/site.db.writer-lock" ) );

echo "-- new Queue('site.db') then chdir(): still the database's lock file\n";
$q = new WriterLock\Queue( 'site.db' );
chdir( "$dir/elsewhere" );
$q->begin( $sqlite, 5 );
$other = probe_begin( $path, 0.2 );
echo $other['ok'] ? "not queued on the database's lock file\n" : "queued on site.db.writer-lock\n";
$q->rollback( $sqlite );
var_dump( file_exists( "$dir/elsewhere/site.db.writer-lock" ) );

echo "-- a queue made for another database than the connection's: refused, nothing written\n";
make_db( "$dir/site", 'other.db' );
$q = new WriterLock\Queue( "$dir/site/other.db" );
foreach ( array( $sqlite, $pdo ) as $db )
{
    try
    {
        $q->begin( $db, 1 );
    }
    catch ( WriterLock\Exception $e )
    {
        echo get_class( $e ), ': ', str_replace( $dir, '<dir>', $e->getMessage() ), "\n";
    }
    var_dump( $q->holding() );
}

echo "-- the caller's busy timeout is put back when the turn ends (begin/commit, rollback, transaction, exec)\n";
$sqlite->busyTimeout( 7000 );
$pdo->exec( 'PRAGMA busy_timeout = 3000' );
chdir( "$dir/site" );
foreach ( array( $sqlite, $pdo ) as $db )
{
    $read = function () use ( $db ) {
        return $db instanceof PDO ? (int)$db->query( 'PRAGMA busy_timeout' )->fetchColumn() : $db->querySingle( 'PRAGMA busy_timeout' );
    };
    $before = $read();
    $q = WriterLock\Queue::forConnection( $db );
    $q->begin( $db, 20 );
    $inside = $read();
    $q->commit( $db );
    $after = array( $read() );
    $q->begin( $db, 20 );
    $q->rollback( $db );
    $after[] = $read();
    $q->transaction( $db, function () {} );
    $after[] = $read();
    $q->exec( $db, "INSERT INTO pub (worker) VALUES ('timeout')", 9.0 );
    $after[] = $read();
    echo get_class( $db ), ": $before before, ", $inside > 19000 ? 'the time left' : $inside, ' inside, after: ', implode( ' ', $after ), "\n";
}

echo "-- connections without a file\n";
foreach ( array( new SQLite3( ':memory:' ), new PDO( 'sqlite::memory:' ), new PDO( 'sqlite:' ) ) as $db )
{
    try
    {
        WriterLock\Queue::forConnection( $db );
    }
    catch ( WriterLock\Exception $e )
    {
        echo get_class( $e ), ': ', $e->getMessage(), "\n";
    }
}
?>
--EXPECT--
-- forConnection() of SQLite3 and PDO, opened by a relative path
SQLite3: queued on site.db.writer-lock
PDO: queued on site.db.writer-lock
bool(false)
-- new Queue('site.db') then chdir(): still the database's lock file
queued on site.db.writer-lock
bool(false)
-- a queue made for another database than the connection's: refused, nothing written
WriterLock\Exception: this writer queue is for <dir>/site/other.db but the connection's database is <dir>/site/site.db; writers exclude each other only through the queue of the database they write, so nothing was run: make the queue for the connection's own database file, or with WriterLock\Queue::forConnection($db)
bool(false)
WriterLock\Exception: this writer queue is for <dir>/site/other.db but the connection's database is <dir>/site/site.db; writers exclude each other only through the queue of the database they write, so nothing was run: make the queue for the connection's own database file, or with WriterLock\Queue::forConnection($db)
bool(false)
-- the caller's busy timeout is put back when the turn ends (begin/commit, rollback, transaction, exec)
SQLite3: 7000 before, the time left inside, after: 7000 7000 7000 7000
PDO: 3000 before, the time left inside, after: 3000 3000 3000 3000
-- connections without a file
WriterLock\Exception: WriterLock\Queue::forConnection(): the connection's database is in memory or temporary (it has no file), so no other process can write it and it needs no queue
WriterLock\Exception: WriterLock\Queue::forConnection(): the connection's database is in memory or temporary (it has no file), so no other process can write it and it needs no queue
WriterLock\Exception: WriterLock\Queue::forConnection(): the connection's database is in memory or temporary (it has no file), so no other process can write it and it needs no queue
