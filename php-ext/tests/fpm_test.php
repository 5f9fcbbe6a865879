<?php
// Real PHP-FPM (Debian's php-fpm8.2) with the extension and a pool of four
// workers, driven by concurrent FastCGI requests (cgi-fcgi): every request
// publishes and commits; each worker keeps its queue handle (the open lock
// file) across requests; a request that ends inside a transaction leaves no
// turn behind; the queued driver uses the web request's waits.
require __DIR__ . '/lib.php';

const FPM = '/usr/sbin/php-fpm8.2';
const WORKERS = 4;

$dir = tmpdir( 'wlfpm' );
$path = make_db( $dir );

$user = posix_getpwuid( posix_geteuid() )['name'];
$group = posix_getgrgid( posix_getegid() )['name'];
$conf = "$dir/fpm.conf";
file_put_contents( $conf, <<<CONF
[global]
pid = $dir/fpm.pid
error_log = $dir/fpm.log
daemonize = no

[writerlock]
user = $user
group = $group
listen = $dir/fpm.sock
pm = static
pm.max_children = 4
clear_env = no
catch_workers_output = yes
php_admin_value[error_log] = $dir/php-errors.log
php_admin_flag[log_errors] = on
php_admin_flag[display_errors] = off

CONF
);

$fpm = new Child( array( FPM, '-F', '-R', '-y', $conf, '-d', 'extension=' . ext_path() ) );
register_shutdown_function( function () use ( $fpm, $dir ) {
    if ( $fpm->code === null )
    {
        posix_kill( $fpm->pid, SIGQUIT );
        $fpm->wait();
    }
    exec( 'rm -rf ' . escapeshellarg( $dir ) );   // after php-fpm wrote its last log line
} );

/** Runs FastCGI requests to the pool all at once; returns the response bodies. */
function fcgi_requests( $dir, $script, array $queries )
{
    $children = array();
    foreach ( $queries as $query )
    {
        $env = array( 'SCRIPT_FILENAME' => $script, 'SCRIPT_NAME' => '/' . basename( $script ), 'REQUEST_METHOD' => 'GET',
                      'QUERY_STRING' => http_build_query( $query ), 'GATEWAY_INTERFACE' => 'CGI/1.1',
                      'SERVER_PROTOCOL' => 'HTTP/1.1', 'REQUEST_URI' => '/' . basename( $script ), 'PATH' => getenv( 'PATH' ) );
        $children[] = new Child( array( 'cgi-fcgi', '-bind', '-connect', "$dir/fpm.sock" ), $dir, $env );
    }
    $bodies = array();
    foreach ( $children as $child )
    {
        $child->wait();
        $parts = preg_split( "/\r?\n\r?\n/", $child->out, 2 );
        $bodies[] = isset( $parts[1] ) ? $parts[1] : $child->out;
    }
    return $bodies;
}

t( 'php-fpm starts with the extension and a pool of workers', function () use ( $dir, $fpm ) {
    $deadline = microtime( true ) + 15;
    while ( !file_exists( "$dir/fpm.sock" ) && microtime( true ) < $deadline )
    {
        $status = proc_get_status( $fpm->proc );
        check( $status['running'], 'php-fpm exited: ' . @file_get_contents( "$dir/fpm.log" ) );
        usleep( 20000 );
    }
    check( file_exists( "$dir/fpm.sock" ), 'php-fpm did not open its socket: ' . @file_get_contents( "$dir/fpm.log" ) );
    $workers = array();
    $deadline = microtime( true ) + 5;
    do
    {
        $workers = array();
        foreach ( glob( '/proc/[0-9]*/stat' ) as $stat )
        {
            // "pid (comm) state ppid ...": the parent's pid follows the state.
            $text = (string)@file_get_contents( $stat );
            $fields = explode( ' ', substr( $text, (int)strrpos( $text, ')' ) + 2 ) );
            if ( isset( $fields[1] ) && (int)$fields[1] === $fpm->pid )
            {
                $workers[] = basename( dirname( $stat ) );
            }
        }
    } while ( count( $workers ) < WORKERS && microtime( true ) < $deadline && usleep( 20000 ) === null );
    check( count( $workers ) === WORKERS, 'workers of the pool: ' . count( $workers ) );
} );

$script = __DIR__ . '/helpers/fpm_publish.php';
$responses = array();

t( 'concurrent FastCGI requests each publish, and every one commits', function () use ( $dir, $path, $script, &$responses ) {
    foreach ( array( 0, 1 ) as $round )
    {
        $queries = array();
        for ( $i = 0; $i < 24; $i++ )
        {
            $queries[] = array( 'db' => $path, 'id' => $round * 100 + $i );
        }
        foreach ( fcgi_requests( $dir, $script, $queries ) as $body )
        {
            $r = json_decode( $body, true );
            check( is_array( $r ), "a request answered: $body" );
            check_same( 'fpm-fcgi', $r['sapi'], 'SAPI' );
            check_same( true, $r['committed'], "request {$r['id']} committed" );
            $responses[] = $r;
        }
    }
    check_same( 48, count_rows( $path, "worker LIKE 'fpm-%'" ), 'rows' );
    $db = new SQLite3( $path );
    check_same( 0, $db->querySingle( "SELECT COUNT(*) FROM pub a WHERE seen <> (SELECT COUNT(*) FROM pub b WHERE b.id < a.id)" ),
                'publishes whose read was stale' );
    $waits = array_column( $responses, 'wait' );
    printf( "# php-fpm: 48 requests on %d workers all committed; longest wait for a turn %.3f s\n",
            count( array_unique( array_column( $responses, 'pid' ) ) ), max( $waits ) );
} );

t( 'each worker keeps its queue handle across requests', function () use ( &$responses ) {
    check( count( $responses ) === 48, 'no responses from the previous test' );
    $byPid = array();
    foreach ( $responses as $r )
    {
        $byPid[$r['pid']][] = $r;
    }
    check( count( $byPid ) >= 2, 'the requests were served by ' . count( $byPid ) . ' worker(s)' );
    foreach ( $byPid as $pid => $list )
    {
        // The worker's own count of queued transactions went 1, 2, 3, ...:
        // the module's state lived on from request to request.
        $counts = array_column( $list, 'begun' );
        sort( $counts );
        check_same( range( 1, count( $list ) ), $counts, "worker $pid's count of queued transactions" );
        // Only its first request found no lock file open; every later one
        // found the descriptor the first opened, still open.
        usort( $list, function ( $a, $b ) { return $a['begun'] - $b['begun']; } );
        check_same( null, $list[0]['kept_fd'], "worker $pid's first request found a lock file open" );
        $fds = array_unique( array_column( array_slice( $list, 1 ), 'kept_fd' ) );
        if ( count( $list ) > 1 )
        {
            check( count( $fds ) === 1 && reset( $fds ) !== null,
                   "worker $pid's later requests found the lock file open on descriptors " . json_encode( $fds ) );
        }
    }
} );

t( 'requests that end inside a transaction (exit, fatal error) leave no turn behind', function () use ( $dir, $path, $script ) {
    $queries = array();
    for ( $i = 0; $i < 8; $i++ )
    {
        $queries[] = array( 'db' => $path, 'id' => 500 + $i, 'mode' => $i % 2 ? 'fatal' : 'abandon' );
    }
    fcgi_requests( $dir, $script, $queries );
    check_same( 0, count_rows( $path, 'seq >= 500' ), 'rows of the abandoned requests' );
    $probe = probe_begin( $path, 2 );
    check( $probe['ok'] && $probe['waited'] < 0.5, 'a turn outlived its request: ' . json_encode( $probe ) );
    $after = array();
    for ( $i = 0; $i < 8; $i++ )
    {
        $after[] = array( 'db' => $path, 'id' => 600 + $i );
    }
    foreach ( fcgi_requests( $dir, $script, $after ) as $body )
    {
        $r = json_decode( $body, true );
        check( is_array( $r ) && $r['committed'] === true && $r['wait'] < 1, "a request after the abandoned ones: $body" );
    }
} );

t( 'the queued driver in a web request waits SQLiteTransactionWait, logs the exact text, fails with eZDBException', function () use ( $dir, $path ) {
    $site = "$dir/site";
    mkdir( $site );
    $ini = "$dir/web.json";
    file_put_contents( $ini, json_encode( array( 'SQLiteTransactionWait' => '1', 'SQLiteCLITransactionWait' => '7',
                                                 'SQLiteBusyTimeout' => '300', 'SQLiteCLIBusyTimeout' => '9000' ) ) );
    $holder = start_holder( $path );
    try
    {
        $bodies = fcgi_requests( $dir, __DIR__ . '/helpers/fpm_driver.php', array(
            array( 'db' => $path, 'dir' => $site, 'ini' => $ini, 'what' => 'transaction' ),
            array( 'db' => $path, 'dir' => $site, 'ini' => $ini, 'what' => 'statement' ) ) );
    }
    finally
    {
        release_holder( $holder );
    }
    $tx = json_decode( $bodies[0], true );
    $st = json_decode( $bodies[1], true );
    check( is_array( $tx ) && is_array( $st ), 'answers: ' . implode( ' | ', $bodies ) );
    $text = 'database is busy: the transaction could not start within 1 s (waited 1.0 s, [DatabaseSettings] SQLiteTransactionWait), '
          . 'another write held the lock all that time; nothing was written';
    check_same( 'eZDBException', $tx['result'], 'transaction outcome' );
    check_busy( $text, $tx['message'], 'eZDBException message' );
    check_same( 5, $tx['code'], 'eZDBException code' );
    check_same( 0, $tx['counter'], 'transaction counter after the failed start' );
    check_wait( $tx['elapsed'], 1.0, 'the request waited' );
    check_same( 'failed', $st['result'], 'statement outcome' );
    $stText = 'database is busy: the statement waited 0.3 s for another write to end (limit 0.3 s, [DatabaseSettings] SQLiteBusyTimeout) '
            . 'and was not run; nothing was written';
    check_busy( $stText, $st['message'], 'statement error message' );
    $log = (string)@file_get_contents( "$site/var/log/error.log" );
    check_busy_in( "eZSQLite3QueuedDB::beginQuery:\n$text\n", $log, "error.log, the transaction's line" );
    check_busy_in( "eZSQLite3QueuedDB::query:\n$stText\n", $log, "error.log, the statement's line" );
    check_same( 0, count_rows( $path, "worker LIKE 'fpm-driver%'" ), 'rows written by the failed request' );
} );

t( 'a web request whose SQLiteTransactionWait is not below max_execution_time: logged once, the wait ends before the limit', function () use ( $dir, $path ) {
    $site = "$dir/site-limit";
    mkdir( $site );
    $ini = "$dir/web-limit.json";
    file_put_contents( $ini, json_encode( array( 'SQLiteTransactionWait' => '25' ) ) );
    $holder = start_holder( $path );
    try
    {
        $bodies = fcgi_requests( $dir, __DIR__ . '/helpers/fpm_driver.php', array(
            array( 'db' => $path, 'dir' => $site, 'ini' => $ini, 'what' => 'transaction', 'limit' => 2 ) ) );
    }
    finally
    {
        release_holder( $holder );
    }
    $tx = json_decode( $bodies[0], true );
    check( is_array( $tx ), 'answer: ' . $bodies[0] );
    check_same( 'eZDBException', $tx['result'], 'transaction outcome' );
    check( preg_match( '/^database is busy: the transaction could not start within (\d+(?:\.\d+)?) s \(waited (\d+\.\d) s, max_execution_time\), '
                       . 'another write held the lock all that time; nothing was written$/D', $tx['message'], $m ) === 1, 'message: ' . $tx['message'] );
    // The limit quoted is the setting as set (2 s), not the CPU time its timer had left
    // ("1.976 s"); the wait ran to what was left.
    check_same( '2', $m[1], 'the limit in the message: ' . $tx['message'] );
    check( (float)$m[2] > 1.4 && (float)$m[2] <= 2.1, 'the wait in the message: ' . $tx['message'] );
    check_wait( $tx['elapsed'], 1.5, 'the request waited' );
    $log = (string)@file_get_contents( "$site/var/log/error.log" );
    check_same( 1, substr_count( $log, "[DatabaseSettings] SQLiteTransactionWait is 25 s, not below PHP's max_execution_time of 2 s" ), "error.log:\n$log" );
} );

t( 'workers that kept their lock files wait for a writer holding a new one after rm or a rename over it', function () use ( $dir, $path ) {
    $lock = "$path.writer-lock";
    $turn = __DIR__ . '/helpers/fpm_turn.php';
    $queries = array_fill( 0, 8, array( 'db' => $path ) );
    foreach ( array( 'rm', 'rename' ) as $how )
    {
        // Every worker takes a turn first, so each keeps the lock file open.
        $kept = 0;
        foreach ( fcgi_requests( $dir, $turn, $queries ) as $body )
        {
            $r = json_decode( $body, true );
            check( is_array( $r ), "a request answered: $body" );
        }
        if ( $how === 'rm' )
        {
            check( unlink( $lock ), 'rm the lock file' );
        }
        else
        {
            file_put_contents( "$lock.new", '' );
            check( rename( "$lock.new", $lock ), 'rename a new file over the lock file' );
        }
        // A command-line writer holds the new file's lock for 0.8 s.
        $holder = new Child( php_cmd( __DIR__ . '/helpers/lock_holder.php', array( $lock, 0.8 ), false ) );
        $line = $holder->line();
        check( strpos( $line, 'held ' ) === 0, "the holder did not report holding: $line" );
        $bodies = fcgi_requests( $dir, $turn, $queries );
        $holder->wait();
        check( preg_match( '/released (\d+)/', $holder->out, $m ) === 1, "the holder's output: {$holder->out} {$holder->err}" );
        $released = (int)$m[1];
        foreach ( $bodies as $body )
        {
            $r = json_decode( $body, true );
            check( is_array( $r ), "a request answered: $body" );
            $kept += $r['kept_fd'] !== null ? 1 : 0;
            check( $r['enter'] >= $released,
                   sprintf( "%s: worker %d took the turn %.3f s before the command-line writer let go", $how, $r['pid'], ( $released - $r['enter'] ) / 1e9 ) );
        }
        check( $kept > 0, "$how: no request used a lock file its worker kept" );
    }
} );

t( 'the pool logged no PHP warning or notice', function () use ( $dir ) {
    $log = (string)@file_get_contents( "$dir/php-errors.log" ) . (string)@file_get_contents( "$dir/fpm.log" );
    check( !preg_match( '/PHP (Warning|Notice|Deprecated)/', $log ), "logs:\n$log" );
    $fatal = preg_match_all( '/PHP Fatal error:  Uncaught Error: Call to undefined function undefined_function_in_a_request/', $log );
    check_same( 4, $fatal, 'the fatal errors of the requests that asked for one' );
} );
