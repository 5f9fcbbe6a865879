<?php
// Real PHP-FPM (php-fpm8.2), one worker per pool serving request after
// request: what the queued driver means to say once per process is logged
// once per worker, not once per request: that the writerlock extension is
// not loaded (a pool without it, where the driver falls back to BEGIN
// IMMEDIATE), and that SQLiteTransactionWait is not below max_execution_time.
require __DIR__ . '/lib.php';

const FPM = '/usr/sbin/php-fpm8.2';
const REQUESTS = 4;

$dir = tmpdir( 'wlfpm1' );
$path = make_db( $dir );

/** Starts a php-fpm master with one static worker on $dir/$name.sock; returns it once the socket is there. */
function start_fpm( $dir, $name, array $extra )
{
    $user = posix_getpwuid( posix_geteuid() )['name'];
    $group = posix_getgrgid( posix_getegid() )['name'];
    $conf = "$dir/$name.conf";
    file_put_contents( $conf, <<<CONF
[global]
pid = $dir/$name.pid
error_log = $dir/$name.log
daemonize = no

[$name]
user = $user
group = $group
listen = $dir/$name.sock
pm = static
pm.max_children = 1
clear_env = no
catch_workers_output = yes
php_admin_value[error_log] = $dir/$name-php-errors.log
php_admin_flag[log_errors] = on
php_admin_flag[display_errors] = off

CONF
    );
    $fpm = new Child( array_merge( array( FPM, '-F', '-R', '-y', $conf ), $extra ) );
    register_shutdown_function( function () use ( $fpm ) {
        if ( $fpm->code === null )
        {
            posix_kill( $fpm->pid, SIGQUIT );
            $fpm->wait();
        }
    } );
    $deadline = microtime( true ) + 15;
    while ( !file_exists( "$dir/$name.sock" ) && microtime( true ) < $deadline )
    {
        $status = proc_get_status( $fpm->proc );
        check( $status['running'], 'php-fpm exited: ' . @file_get_contents( "$dir/$name.log" ) );
        usleep( 20000 );
    }
    check( file_exists( "$dir/$name.sock" ), 'php-fpm did not open its socket: ' . @file_get_contents( "$dir/$name.log" ) );
    return $fpm;
}

/** One FastCGI request to $sock after another; returns the decoded answers. */
function fcgi_one_by_one( $dir, $sock, $script, array $query, $count )
{
    $answers = array();
    for ( $i = 0; $i < $count; $i++ )
    {
        $env = array( 'SCRIPT_FILENAME' => $script, 'SCRIPT_NAME' => '/' . basename( $script ), 'REQUEST_METHOD' => 'GET',
                      'QUERY_STRING' => http_build_query( $query ), 'GATEWAY_INTERFACE' => 'CGI/1.1',
                      'SERVER_PROTOCOL' => 'HTTP/1.1', 'REQUEST_URI' => '/' . basename( $script ), 'PATH' => getenv( 'PATH' ) );
        $child = new Child( array( 'cgi-fcgi', '-bind', '-connect', $sock ), $dir, $env );
        $child->wait();
        $parts = preg_split( "/\r?\n\r?\n/", $child->out, 2 );
        $body = isset( $parts[1] ) ? $parts[1] : $child->out;
        $answer = json_decode( $body, true );
        check( is_array( $answer ), "request $i answered: $body {$child->err}" );
        $answers[] = $answer;
    }
    return $answers;
}

t( 'a worker without the extension: "not loaded" is logged once over ' . REQUESTS . ' requests, each of which commits', function () use ( $dir, $path ) {
    start_fpm( $dir, 'noext', array() );
    $site = "$dir/site-noext";
    mkdir( $site );
    $ini = "$dir/noext.json";
    file_put_contents( $ini, json_encode( array( 'SQLiteTransactionWait' => '2' ) ) );
    $answers = fcgi_one_by_one( $dir, "$dir/noext.sock", __DIR__ . '/helpers/fpm_driver.php',
                                array( 'db' => $path, 'dir' => $site, 'ini' => $ini, 'what' => 'transaction' ), REQUESTS );
    foreach ( $answers as $a )
    {
        check_same( 'committed', $a['result'], 'a request without the extension' );
        check_same( false, $a['loaded'], 'the extension loaded in the pool started without it' );
    }
    check_same( 1, count( array_unique( array_column( $answers, 'pid' ) ) ), 'workers that served the requests' );
    $log = (string)@file_get_contents( "$site/var/log/error.log" );
    check_same( 1, substr_count( $log, 'The writerlock extension is not loaded (extension=writerlock.so)' ), "error.log:\n$log" );
} );

t( 'a worker whose SQLiteTransactionWait is not below max_execution_time: logged once over ' . REQUESTS . ' requests, each of which commits', function () use ( $dir, $path ) {
    start_fpm( $dir, 'ext', array( '-d', 'extension=' . ext_path() ) );
    $site = "$dir/site-ext";
    mkdir( $site );
    $ini = "$dir/ext.json";
    file_put_contents( $ini, json_encode( array( 'SQLiteTransactionWait' => '25' ) ) );
    $answers = fcgi_one_by_one( $dir, "$dir/ext.sock", __DIR__ . '/helpers/fpm_driver.php',
                                array( 'db' => $path, 'dir' => $site, 'ini' => $ini, 'what' => 'transaction', 'limit' => 20 ), REQUESTS );
    foreach ( $answers as $a )
    {
        check_same( 'committed', $a['result'], 'a request with the extension' );
        check_same( true, $a['loaded'], 'the extension loaded' );
    }
    check_same( 1, count( array_unique( array_column( $answers, 'pid' ) ) ), 'workers that served the requests' );
    $log = (string)@file_get_contents( "$site/var/log/error.log" );
    check_same( 1, substr_count( $log, "[DatabaseSettings] SQLiteTransactionWait is 25 s, not below PHP's max_execution_time of 20 s" ), "error.log:\n$log" );
} );

t( 'the pools logged no PHP warning or notice', function () use ( $dir ) {
    $log = '';
    foreach ( array( 'noext', 'ext' ) as $name )
    {
        $log .= (string)@file_get_contents( "$dir/$name-php-errors.log" ) . (string)@file_get_contents( "$dir/$name.log" );
    }
    check( !preg_match( '/PHP (Warning|Notice|Deprecated|Fatal)/', $log ), "logs:\n$log" );
} );
