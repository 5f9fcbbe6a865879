<?php
// A commit-begin hot loop in one process does not starve a page save in
// another: the save gets its turn within a few milliseconds, every time.
require __DIR__ . '/lib.php';

t( 'page saves next to a commit-begin hot loop all get their turn quickly', function () {
    $path = make_db( tmpdir() );
    $loop = new Child( php_cmd( __DIR__ . '/helpers/hotloop.php', array( $path, 3.0 ) ) );
    check_same( 'running', $loop->line(), 'hot loop' );
    $db = new SQLite3( $path );
    $queue = new WriterLock\Queue( $path );
    $waits = array();
    for ( $save = 0; $save < 10; $save++ )
    {
        usleep( 100000 );
        $queue->begin( $db, 5 );      // a page save: 5 s is plenty when the queue is fair
        $waits[] = $queue->lastWait();
        $db->exec( "INSERT INTO pub (worker, seq) VALUES ('save', $save)" );
        check_same( true, $queue->commit( $db ), "commit of save $save" );
    }
    $loopTransactions = (int)$loop->line( 10 );
    check_same( 0, $loop->wait(), 'hot loop exit status' );
    check_same( 10, count_rows( $path, "worker = 'save'" ), 'saved pages' );
    check( $loopTransactions > 100, "the hot loop ran only $loopTransactions transactions" );
    check( max( $waits ) < 1.0, 'a save waited ' . max( $waits ) . ' s' );
    sort( $waits );
    printf( "# hot loop: %d transactions in 3 s; page saves waited median %.1f ms, max %.1f ms\n",
            $loopTransactions, 1000 * $waits[5], 1000 * max( $waits ) );
} );
