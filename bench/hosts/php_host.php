<?php
/**
 * One writer from PHP: the same one-row INSERT per transaction written by
 * hand (BEGIN IMMEDIATE; INSERT; COMMIT) and through the queue
 * ($q->begin()/commit() and $q->transaction()), for \SQLite3 and for PDO
 * (sqlite), on a WAL database with synchronous=NORMAL. Each round runs every
 * mode once, in alternating order (forward, then backward), TX transactions a
 * mode; a mode's ratio in a round is its rate over that host's hand-written
 * rate in the same round, and the figure is the median of the rounds'
 * ratios (of wall-clock rates, and of rates per second of this process's CPU
 * time, steadier on a machine that runs other work). Prints one JSON object.
 *
 *   php -d extension=target/release/libwriterlock_php.so bench/hosts/php_host.php [--tx 20000] [--rounds 5] [--dir /tmp]
 */

error_reporting( E_ALL );
$opts = getopt( '', array( 'tx:', 'rounds:', 'dir:' ) );
$tx = isset( $opts['tx'] ) ? (int)$opts['tx'] : 20000;
$rounds = isset( $opts['rounds'] ) ? (int)$opts['rounds'] : 5;
$base = isset( $opts['dir'] ) ? $opts['dir'] : sys_get_temp_dir();
if ( !extension_loaded( 'writerlock' ) )
{
    fwrite( STDERR, "php_host.php: load the extension: php -d extension=/abs/path/libwriterlock_php.so bench/hosts/php_host.php\n" );
    exit( 2 );
}
if ( $tx < 1 || $rounds < 1 )
{
    fwrite( STDERR, "php_host.php: --tx and --rounds must be at least 1\n" );
    exit( 2 );
}
$dir = $base . '/wl-php-host-' . getmypid();
mkdir( $dir );
register_shutdown_function( function () use ( $dir ) { exec( 'rm -rf ' . escapeshellarg( $dir ) ); } );

const INSERT = 'INSERT INTO t (v) VALUES (1)';

/** Opens $host ("SQLite3" or "PDO") on $path: WAL, synchronous=NORMAL, a table t. */
function open_db( $host, $path )
{
    if ( $host === 'PDO' )
    {
        $db = new PDO( "sqlite:$path" );
        $db->setAttribute( PDO::ATTR_ERRMODE, PDO::ERRMODE_EXCEPTION );
    }
    else
    {
        $db = new SQLite3( $path );
        $db->enableExceptions( true );
    }
    $db->exec( 'PRAGMA journal_mode = wal' );
    $db->exec( 'PRAGMA synchronous = NORMAL' );
    $db->exec( 'CREATE TABLE IF NOT EXISTS t (id INTEGER PRIMARY KEY, v INTEGER)' );
    return $db;
}

/** CPU seconds this process used so far (user and system). */
function cpu_seconds()
{
    $u = getrusage();
    return $u['ru_utime.tv_sec'] + $u['ru_utime.tv_usec'] / 1e6 + $u['ru_stime.tv_sec'] + $u['ru_stime.tv_usec'] / 1e6;
}

/**
 * Runs $n transactions of $mode on $db; returns transactions a second of
 * wall-clock time and of this process's CPU time (the second is steadier on
 * a machine that runs other work).
 */
function run_mode( $mode, $db, WriterLock\Queue $q, $n )
{
    $insert = function ( $db ) { $db->exec( INSERT ); };
    $cpu = cpu_seconds();
    $start = hrtime( true );
    switch ( $mode )
    {
        case 'by hand':
            for ( $i = 0; $i < $n; $i++ )
            {
                $db->exec( 'BEGIN IMMEDIATE' );
                $db->exec( INSERT );
                $db->exec( 'COMMIT' );
            }
            break;
        case 'begin/commit':
            for ( $i = 0; $i < $n; $i++ )
            {
                $q->begin( $db );
                $db->exec( INSERT );
                $q->commit( $db );
            }
            break;
        case 'transaction':
            for ( $i = 0; $i < $n; $i++ )
            {
                $q->transaction( $db, $insert );
            }
            break;
    }
    $seconds = ( hrtime( true ) - $start ) / 1e9;
    $cpu = max( cpu_seconds() - $cpu, 1e-6 );
    $db->exec( 'DELETE FROM t' );
    return array( $n / $seconds, $n / $cpu );
}

function median( array $values )
{
    sort( $values );
    $n = count( $values );
    return $n % 2 ? $values[intdiv( $n, 2 )] : ( $values[$n / 2 - 1] + $values[$n / 2] ) / 2;
}

$modes = array( 'by hand', 'begin/commit', 'transaction' );
$hosts = array( 'SQLite3', 'PDO' );
$rates = array();
$ratios = array();
$cpuRates = array();
$cpuRatios = array();
$conns = array();
foreach ( $hosts as $host )
{
    $path = "$dir/" . strtolower( $host ) . '.db';
    $conns[$host] = array( open_db( $host, $path ), new WriterLock\Queue( $path ) );
    // Warm-up: the page cache, the lock files, PHP's and SQLite's first allocations.
    foreach ( $modes as $mode )
    {
        run_mode( $mode, $conns[$host][0], $conns[$host][1], min( $tx, 2000 ) );
    }
}
for ( $round = 0; $round < $rounds; $round++ )
{
    $order = array();
    foreach ( $hosts as $host )
    {
        foreach ( $modes as $mode )
        {
            $order[] = array( $host, $mode );
        }
    }
    if ( $round % 2 === 1 )
    {
        $order = array_reverse( $order );
    }
    $thisRound = array();
    foreach ( $order as list( $host, $mode ) )
    {
        list( $rate, $cpuRate ) = run_mode( $mode, $conns[$host][0], $conns[$host][1], $tx );
        $rates[$host][$mode][] = $rate;
        $cpuRates[$host][$mode][] = $cpuRate;
        $thisRound[$host][$mode] = array( $rate, $cpuRate );
    }
    foreach ( $hosts as $host )
    {
        foreach ( array( 'begin/commit', 'transaction' ) as $mode )
        {
            $ratios[$host][$mode][] = $thisRound[$host][$mode][0] / $thisRound[$host]['by hand'][0];
            $cpuRatios[$host][$mode][] = $thisRound[$host][$mode][1] / $thisRound[$host]['by hand'][1];
        }
    }
}

$out = array(
    'host' => 'php',
    'php' => PHP_VERSION,
    'sqlite' => SQLite3::version()['versionString'],
    'journal_mode' => 'wal',
    'synchronous' => 'NORMAL',
    'transactions_per_round' => $tx,
    'rounds' => $rounds,
    'results' => array(),
);
foreach ( $hosts as $host )
{
    foreach ( array( 'begin/commit', 'transaction' ) as $mode )
    {
        $out['results'][] = array(
            'connection' => $host,
            'mode' => $mode,
            'by_hand_tx_per_s' => round( median( $rates[$host]['by hand'] ) ),
            'queue_tx_per_s' => round( median( $rates[$host][$mode] ) ),
            'ratio_median' => round( median( $ratios[$host][$mode] ), 3 ),
            'ratios' => array_map( function ( $r ) { return round( $r, 3 ); }, $ratios[$host][$mode] ),
            'by_hand_tx_per_cpu_s' => round( median( $cpuRates[$host]['by hand'] ) ),
            'queue_tx_per_cpu_s' => round( median( $cpuRates[$host][$mode] ) ),
            'cpu_ratio_median' => round( median( $cpuRatios[$host][$mode] ), 3 ),
        );
    }
}
echo json_encode( $out, JSON_PRETTY_PRINT | JSON_UNESCAPED_SLASHES ), "\n";
