<?php
// 64 editors publish 3 times each at the same moment (each publish reads,
// then writes): through the queue all 192 commit, on \SQLite3 and on PDO (in
// its default exception mode with begin()/commit(), in silent mode through
// transaction()); with a plain BEGIN on the same load some are lost. The queued driver, on the stand-ins, does the
// same as the queue.
require __DIR__ . '/lib.php';

/** Starts $n publishers, lets them go together, returns their results. */
function publish_together( $path, $mode, $n, $count )
{
    $children = array();
    for ( $i = 0; $i < $n; $i++ )
    {
        $children[] = new Child( php_cmd( __DIR__ . '/helpers/publisher.php', array( $path, $mode, $count, "$mode-$i" ) ),
                                 dirname( $path ) );
    }
    foreach ( $children as $child )
    {
        check_same( 'ready', $child->line( 60 ), "publisher {$child->pid}" );
    }
    $start = microtime( true );
    foreach ( $children as $child )
    {
        $child->send( "go\n" );
    }
    $results = array();
    foreach ( $children as $child )
    {
        $line = $child->line( 120 );
        $child->wait();
        $result = json_decode( $line, true );
        check( is_array( $result ), "publisher said: $line {$child->err}" );
        check( trim( $child->err ) === '', "publisher {$child->pid} wrote to stderr: {$child->err}" );
        $results[] = $result;
    }
    $elapsed = microtime( true ) - $start;
    $sum = array( 'committed' => 0, 'failed' => 0, 'errors' => array(), 'waits' => array(), 'elapsed' => $elapsed );
    foreach ( $results as $r )
    {
        $sum['committed'] += $r['committed'];
        $sum['failed'] += $r['failed'];
        $sum['errors'] = array_merge( $sum['errors'], $r['errors'] );
        $sum['waits'] = array_merge( $sum['waits'], $r['waits'] );
    }
    return $sum;
}

t( '64 processes x 3 publishes through the queue: all 192 commit', function () {
    $path = make_db( tmpdir() );
    $sum = publish_together( $path, 'queue', 64, 3 );
    check_same( array(), $sum['errors'], 'errors' );
    check_same( 192, $sum['committed'], 'committed publishes' );
    check_same( 192, count_rows( $path ), 'rows in the database' );
    // Each publish saw every row committed before it: the reads were current.
    $db = new SQLite3( $path );
    check_same( 0, $db->querySingle( 'SELECT COUNT(*) FROM pub a WHERE seen <> (SELECT COUNT(*) FROM pub b WHERE b.id < a.id)' ),
                'publishes whose read was stale' );
    printf( "# queue: 192 publishes in %.2f s, longest wait for a turn %.3f s\n", $sum['elapsed'], max( $sum['waits'] ) );
} );

foreach ( array( 'pdo' => 'PDO (exceptions), begin() and commit()', 'pdo-silent' => 'PDO (ERRMODE_SILENT), transaction()' ) as $mode => $what )
{
    t( "64 processes x 3 publishes through the queue on $what: all 192 commit", function () use ( $mode ) {
        $path = make_db( tmpdir() );
        $sum = publish_together( $path, $mode, 64, 3 );
        check_same( array(), $sum['errors'], 'errors' );
        check_same( 192, $sum['committed'], 'committed publishes' );
        check_same( 192, count_rows( $path ), 'rows in the database' );
        $db = new SQLite3( $path );
        check_same( 0, $db->querySingle( 'SELECT COUNT(*) FROM pub a WHERE seen <> (SELECT COUNT(*) FROM pub b WHERE b.id < a.id)' ),
                    'publishes whose read was stale' );
        printf( "# $mode: 192 publishes in %.2f s, longest wait for a turn %.3f s\n", $sum['elapsed'], max( $sum['waits'] ) );
    } );
}

t( 'the same load with a plain BEGIN loses some publishes', function () {
    $path = make_db( tmpdir() );
    $sum = publish_together( $path, 'plain', 64, 3 );
    check( $sum['failed'] > 0, 'no publish failed with a plain BEGIN (the comparison shows nothing)' );
    check_same( 192 - $sum['failed'], count_rows( $path ), 'rows in the database' );
    $locked = count( array_filter( $sum['errors'], function ( $e ) { return stripos( $e, 'locked' ) !== false || stripos( $e, 'busy' ) !== false; } ) );
    check( $locked > 0, 'the failures were not lock failures: ' . implode( '; ', array_slice( $sum['errors'], 0, 3 ) ) );
    printf( "# plain BEGIN: %d of 192 publishes lost (%s)\n", $sum['failed'], $sum['errors'][0] );
} );

t( '32 processes x 3 publishes through the queued driver: all commit', function () {
    $dir = tmpdir();
    $path = make_db( $dir );
    $sum = publish_together( $path, 'driver', 32, 3 );
    check_same( array(), $sum['errors'], 'errors' );
    check_same( 96, $sum['committed'], 'committed publishes' );
    check_same( 96, count_rows( $path ), 'rows in the database' );
    check( !file_exists( "$dir/var/log/error.log" ), 'error.log: ' . @file_get_contents( "$dir/var/log/error.log" ) );
} );
