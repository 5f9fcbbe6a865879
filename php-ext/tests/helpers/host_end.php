<?php
// Begins a queued transaction on argv[1] and lets the script end it itself
// (argv[2]: sqlite3-commit, sqlite3-rollback, sqlite3-script, pdo-commit,
// pdo-rollback, transaction-commit), as told on stdin:
//   prints "began", waits for "end", ends the transaction without the queue,
//   prints "ended <time before> <time after> <holding: 0|1>", then sleeps
//   until "next", begins and commits a queued transaction, prints "next ok"
//   (or "next failed: <message>"), and exits at end of input.
$path = $argv[1];
$mode = $argv[2];
$pdo = strpos( $mode, 'pdo-' ) === 0;
if ( $pdo )
{
    $db = new PDO( "sqlite:$path" );
    $db->setAttribute( PDO::ATTR_ERRMODE, PDO::ERRMODE_EXCEPTION );
}
else
{
    $db = new SQLite3( $path );
    $db->enableExceptions( true );
}
$q = new WriterLock\Queue( $path );
$line = function () {
    $l = fgets( STDIN );
    return $l === false ? false : trim( $l );
};
$ending = array(
    'sqlite3-commit' => 'COMMIT',
    'sqlite3-rollback' => 'ROLLBACK',
    'sqlite3-script' => "INSERT INTO pub (worker) VALUES ('script'); COMMIT",
    'pdo-commit' => 'COMMIT',
    'pdo-rollback' => 'ROLLBACK',
);
if ( $mode === 'transaction-commit' )
{
    $q->transaction( $db, function ( $db ) use ( $line, $q ) {
        $db->exec( "INSERT INTO pub (worker) VALUES ('in transaction')" );
        echo "began\n";
        $line();
        $before = microtime( true );
        $db->exec( 'COMMIT' );
        $after = microtime( true );
        printf( "ended %.6f %.6f %d\n", $before, $after, $q->holding() ? 1 : 0 );
        $line();
    } );
}
else
{
    $q->begin( $db, 5 );
    $db->exec( "INSERT INTO pub (worker) VALUES ('$mode')" );
    echo "began\n";
    $line();
    $before = microtime( true );
    $db->exec( $ending[$mode] );
    $after = microtime( true );
    printf( "ended %.6f %.6f %d\n", $before, $after, $q->holding() ? 1 : 0 );
    $line();
}
try
{
    $q->begin( $db, 5 );
    $db->exec( "INSERT INTO pub (worker) VALUES ('next')" );
    $q->commit( $db );
    echo "next ok\n";
}
catch ( Throwable $e )
{
    echo 'next failed: ', get_class( $e ), ': ', $e->getMessage(), "\n";
}
$line();
