<?php
// One writer from PHP, by hand against the queue (make bench's host scenario).
//
//   php -d extension=PATH/libwriterlock_php.so bench/hosts/php_host.php DRIVER DATABASE TRANSACTIONS ROUNDS
//
// DRIVER is sqlite3 (the SQLite3 class) or pdo (PDO SQLite). One process, one connection
// (synchronous=NORMAL) on a WAL database that already has the bench's table t. Each round
// runs TRANSACTIONS one-row INSERT transactions per variant (the INSERT prepared once), the
// variants' order reversed every other round, and prints one JSON line at the end: every
// variant's rate in every round (transactions per second), by the clock and by the process's
// CPU time (which other work on a shared machine disturbs less). Variants:
//
//   hand          $db->exec('BEGIN IMMEDIATE'), the INSERT, $db->exec('COMMIT')
//   begin_commit  $queue->begin($db), the INSERT, $queue->commit($db)
//   helper        $queue->transaction($db, function () { the INSERT })

if ($argc !== 5) {
    fwrite(STDERR, "usage: php_host.php sqlite3|pdo DATABASE TRANSACTIONS ROUNDS\n");
    exit(2);
}
[, $driver, $path, $txns, $rounds] = $argv;
$txns = (int) $txns;
$rounds = (int) $rounds;
if (!class_exists('WriterLock\Queue')) {
    fwrite(STDERR, "php_host.php: the writerlock extension is not loaded (php -d extension=...)\n");
    exit(1);
}
$payload = str_repeat('x', 64);
$sql = 'INSERT INTO t (writer, seq, payload) VALUES (?, ?, ?)';
if ($driver === 'sqlite3') {
    $db = new SQLite3($path);
    $db->enableExceptions(true);
    $db->busyTimeout(5000);
    $db->exec('PRAGMA synchronous=NORMAL');
    $stmt = $db->prepare($sql);
    $row = function (int $writer, int $seq) use ($stmt, $payload): void {
        $stmt->bindValue(1, $writer, SQLITE3_INTEGER);
        $stmt->bindValue(2, $seq, SQLITE3_INTEGER);
        $stmt->bindValue(3, $payload, SQLITE3_TEXT);
        $stmt->execute();
        $stmt->reset();
    };
} elseif ($driver === 'pdo') {
    $db = new PDO('sqlite:' . $path, null, null, [PDO::ATTR_ERRMODE => PDO::ERRMODE_EXCEPTION, PDO::ATTR_TIMEOUT => 5]);
    $db->exec('PRAGMA synchronous=NORMAL');
    $stmt = $db->prepare($sql);
    $row = function (int $writer, int $seq) use ($stmt, $payload): void {
        $stmt->execute([$writer, $seq, $payload]);
    };
} else {
    fwrite(STDERR, "php_host.php: DRIVER is sqlite3 or pdo, not $driver\n");
    exit(2);
}
$queue = WriterLock\Queue::forConnection($db);

$variants = [
    'hand' => function (int $n, int $seq) use ($db, $row): void {
        for ($i = 0; $i < $n; $i++) {
            $db->exec('BEGIN IMMEDIATE');
            $row(0, $seq + $i);
            $db->exec('COMMIT');
        }
    },
    'begin_commit' => function (int $n, int $seq) use ($db, $queue, $row): void {
        for ($i = 0; $i < $n; $i++) {
            $queue->begin($db);
            $row(1, $seq + $i);
            $queue->commit($db);
        }
    },
    'helper' => function (int $n, int $seq) use ($db, $queue, $row): void {
        for ($i = 0; $i < $n; $i++) {
            $s = $seq + $i;
            $queue->transaction($db, function () use ($row, $s): void {
                $row(2, $s);
            });
        }
    },
];
$seq = 0;
$warm = min($txns, 500);
foreach ($variants as $run) {
    $run($warm, $seq);
    $seq += $warm;
}
function cpu_seconds(): float
{
    $u = getrusage();
    return $u['ru_utime.tv_sec'] + $u['ru_utime.tv_usec'] / 1e6 + $u['ru_stime.tv_sec'] + $u['ru_stime.tv_usec'] / 1e6;
}
$results = [];
$cpuResults = [];
for ($r = 0; $r < $rounds; $r++) {
    $order = $r % 2 === 0 ? $variants : array_reverse($variants, true);
    $rates = [];
    $cpuRates = [];
    foreach ($order as $name => $run) {
        $start = hrtime(true);
        $used = cpu_seconds();
        $run($txns, $seq);
        $rates[$name] = $txns / ((hrtime(true) - $start) / 1e9);
        $cpuRates[$name] = $txns / max(cpu_seconds() - $used, 1e-6);
        $seq += $txns;
    }
    $results[] = $rates;
    $cpuResults[] = $cpuRates;
}
echo json_encode([
    'host' => 'php-' . $driver,
    'php' => PHP_VERSION,
    'sqlite' => SQLite3::version()['versionString'],
    'rounds' => $results,
    'cpu_rounds' => $cpuResults,
]), "\n";
