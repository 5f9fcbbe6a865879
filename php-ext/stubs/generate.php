<?php
/**
 * Writes writerlock.stubs.php from the loaded extension: every class, parent,
 * flag, method, parameter (name, type, default, by-reference, variadic) and
 * return type comes from PHP's reflection of the module "writerlock", so the
 * stubs cannot say what the extension does not do. Only the prose (PHP keeps
 * no doc comments for an extension's methods) comes from the table below; a
 * method the extension has and the table lacks, or the other way round, stops
 * the generator.
 *
 *     php -d extension=/abs/path/libwriterlock_php.so php-ext/stubs/generate.php           # rewrite the stubs
 *     php -d extension=/abs/path/libwriterlock_php.so php-ext/stubs/generate.php --check   # exit 1 when they drifted
 */

const DOCS = array(
    'WriterLock\\Exception' => array(
        '' => "Base class of every exception the extension throws.",
    ),
    'WriterLock\\BusyException' => array(
        '' => "The wait ran out before the writer got its turn; nothing was written.\n\n"
            . "The message is one of the two fixed texts, for example:\n"
            . "\"database is busy: the transaction could not start within 25 s (waited 25.0 s,\n"
            . "the waitSeconds argument of WriterLock\\Queue::begin()), another write held the lock\n"
            . "all that time; nothing was written\". getCode() is 5 (SQLITE_BUSY).",
        'waited' => "Seconds the writer waited (wall clock).",
        'limit' => "The limit it was given, in seconds.",
        'setting' => "The setting named in the message: the \$setting argument of the call, by default\n"
            . "the call's own argument (\"the waitSeconds argument of WriterLock\\Queue::begin()\"),\n"
            . "or \"max_execution_time\" when that cut the wait short.",
        'holderPid' => "The process that held the writer lock when the wait gave up, where /proc/locks shows one.",
    ),
    'WriterLock\\StartException' => array(
        '' => "The transaction could not start: \"the transaction could not start: <SQLite's message>;\n"
            . "nothing was written\". getCode() is SQLite's result code.",
    ),
    'WriterLock\\Queue' => array(
        '' => "One SQLite database's write queue: writers from every process take turns\n"
            . "(an exclusive flock() on \"<database>.writer-lock\") before BEGIN IMMEDIATE,\n"
            . "instead of failing with \"database is locked\". It drives a \\SQLite3 or a PDO\n"
            . "(sqlite driver) connection through the connection's own sqlite3 handle: the\n"
            . "queue's statements never pass through exec() or query(), and a transaction\n"
            . "the script ends itself (its own COMMIT) gives the turn back at once.\n\n"
            . "The handle behind a Queue is kept per database path for the life of the\n"
            . "process: a long-lived worker (PHP-FPM, a CLI job loop) opens the lock\n"
            . "files once, and a forked child (pcntl_fork()) never touches its\n"
            . "parent's turn.",
        '__construct' => "@param string \$databasePath the path given to new \\SQLite3() or in the PDO DSN, resolved\n"
            . "       against the current directory now; \":memory:\" needs no queue\n"
            . "@throws Exception when the database's directory does not exist",
        'begin' => "Takes the turn within \$waitSeconds (below 1 raised to 1), sets the\n"
            . "connection's busy timeout to the time left, runs BEGIN IMMEDIATE.\n\n"
            . "@throws BusyException the wait ran out; nothing was written\n"
            . "@throws StartException the transaction could not start; nothing was written\n"
            . "@throws Exception the connection is already inside a transaction, or this queue holds the turn",
        'commit' => "Commits and gives the turn back.\n\n"
            . "@return bool false when SQLite refused the COMMIT: the transaction and the turn stay\n"
            . "@throws Exception no queued transaction, or the COMMIT failed and SQLite ended the transaction",
        'rollback' => "Rolls back and gives the turn back.\n\n"
            . "@return bool false when SQLite refused the ROLLBACK: the transaction and the turn stay\n"
            . "@throws Exception no queued transaction",
        'exec' => "Runs one write statement outside a transaction, in turn, within\n"
            . "\$waitSeconds (default 5). Reads, and statements inside an open transaction, run at once.\n\n"
            . "@throws BusyException the wait ran out; the statement was not run\n"
            . "@throws Exception SQLite reported a failure",
        'transaction' => "Begins (as begin()), runs \$fn(\$db), commits, and returns what \$fn returned.\n"
            . "Any throwable from \$fn, or a COMMIT SQLite refuses, rolls the transaction back\n"
            . "and gives the turn back; the throwable is rethrown. When \$fn ends the transaction\n"
            . "itself (commit(), or a COMMIT of its own), nothing more is done.\n\n"
            . "@template T\n"
            . "@param callable(\\SQLite3|\\PDO): T \$fn\n"
            . "@return T\n"
            . "@throws BusyException the wait ran out; nothing was written, \$fn did not run\n"
            . "@throws StartException the transaction could not start; \$fn did not run\n"
            . "@throws Exception the COMMIT failed; the transaction was rolled back",
        'forConnection' => "The queue of the database file an open \\SQLite3 or PDO (sqlite) connection uses\n"
            . "(its main database, as PRAGMA database_list names it).\n\n"
            . "@throws Exception for an in-memory or temporary database\n"
            . "@throws \\ValueError for a PDO of another driver than sqlite",
        'acquire' => "Takes the writer turn without starting a transaction, within \$waitSeconds\n"
            . "(below 1 s raised to 1 s), for code that runs its own BEGIN IMMEDIATE in turn.\n"
            . "exec() through this queue runs at once while it holds the turn.\n\n"
            . "@return float the seconds it waited\n"
            . "@throws BusyException the wait ran out\n"
            . "@throws Exception this queue already holds the turn",
        'release' => "Gives back the turn acquire() took.\n\n"
            . "@throws Exception this queue holds no turn, or holds it for a transaction (end that with commit() or rollback())",
        'holding' => "Whether this queue holds the writer turn in this process.",
        'lastWait' => "Seconds the last begin(), acquire() or queued exec() waited for its turn.",
    ),
);

function fail( $message )
{
    fwrite( STDERR, "generate.php: $message\n" );
    exit( 2 );
}

function type_text( ReflectionType $type = null )
{
    if ( $type === null )
    {
        return '';
    }
    if ( $type instanceof ReflectionUnionType )
    {
        return implode( '|', array_map( 'type_text', $type->getTypes() ) );
    }
    $name = $type->getName();
    $text = $type->isBuiltin() ? $name : '\\' . ltrim( $name, '\\' );
    return ( $type->allowsNull() && $name !== 'mixed' && $name !== 'null' ? '?' : '' ) . $text;
}

function doc_block( $text, $indent )
{
    $lines = explode( "\n", $text );
    if ( count( $lines ) === 1 )
    {
        return "$indent/** {$lines[0]} */\n";
    }
    $out = "$indent/**\n";
    foreach ( $lines as $line )
    {
        $out .= rtrim( "$indent * $line" ) . "\n";
    }
    return $out . "$indent */\n";
}

if ( !extension_loaded( 'writerlock' ) )
{
    fail( 'load the extension: php -d extension=/abs/path/libwriterlock_php.so ' . $argv[0] );
}
$classes = ( new ReflectionExtension( 'writerlock' ) )->getClassNames();
sort( $classes );
// Parents before children.
usort( $classes, function ( $a, $b ) {
    return is_subclass_of( $a, $b ) ? 1 : ( is_subclass_of( $b, $a ) ? -1 : strcmp( $a, $b ) );
} );
$missing = array_diff( $classes, array_keys( DOCS ) ) + array_diff( array_keys( DOCS ), $classes );
if ( $missing )
{
    fail( 'the docs table and the extension disagree on the classes: ' . implode( ', ', $missing ) );
}

$out = "<?php\n"
     . "/**\n"
     . " * IDE stubs for the writerlock PHP extension (module \"writerlock\",\n"
     . " * extension=writerlock.so). Never include this file at run time: the classes\n"
     . " * come from the extension.\n"
     . " *\n"
     . " * Generated from the extension by php-ext/stubs/generate.php; do not edit\n"
     . " * (php-ext/tests/run.sh fails when this file and the extension differ).\n"
     . " */\n\n"
     . "namespace WriterLock {\n";
foreach ( $classes as $name )
{
    $class = new ReflectionClass( $name );
    $docs = DOCS[$name];
    $short = $class->getShortName();
    $parent = $class->getParentClass();
    $out .= "\n" . doc_block( $docs[''], '    ' );
    $out .= '    ' . ( $class->isFinal() ? 'final ' : '' ) . ( $class->isAbstract() ? 'abstract ' : '' ) . "class $short"
          . ( $parent ? ' extends ' . ( $parent->getNamespaceName() === 'WriterLock' ? $parent->getShortName() : '\\' . $parent->getName() ) : '' )
          . "\n    {\n";
    $methods = array();
    foreach ( $class->getMethods() as $method )
    {
        if ( $method->getDeclaringClass()->getName() === $name )
        {
            $methods[] = $method;
        }
    }
    $declared = array_map( function ( $m ) { return $m->getName(); }, $methods );
    $documented = array_diff( array_keys( $docs ), array( '' ) );
    $missing = array_merge( array_diff( $declared, $documented ), array_diff( $documented, $declared ) );
    if ( $missing )
    {
        fail( "the docs table and the extension disagree on the methods of $name: " . implode( ', ', $missing ) );
    }
    $first = true;
    foreach ( $methods as $method )
    {
        $params = array();
        foreach ( $method->getParameters() as $param )
        {
            $text = type_text( $param->getType() );
            $text .= ( $text === '' ? '' : ' ' ) . ( $param->isPassedByReference() ? '&' : '' ) . ( $param->isVariadic() ? '...' : '' ) . '$' . $param->getName();
            if ( $param->isDefaultValueAvailable() )
            {
                $text .= ' = ' . var_export( $param->getDefaultValue(), true );
            }
            $params[] = $text;
        }
        $return = type_text( $method->getReturnType() );
        $out .= ( $first ? '' : "\n" ) . doc_block( $docs[$method->getName()], '        ' );
        $first = false;
        $out .= '        public ' . ( $method->isStatic() ? 'static ' : '' ) . 'function ' . $method->getName()
              . '(' . implode( ', ', $params ) . ')' . ( $return === '' ? '' : ": $return" ) . " {}\n";
    }
    $out .= "    }\n";
}
$out .= "}\n";

$file = __DIR__ . '/writerlock.stubs.php';
if ( in_array( '--check', $argv, true ) )
{
    if ( @file_get_contents( $file ) !== $out )
    {
        $tmp = tempnam( sys_get_temp_dir(), 'stubs' );
        file_put_contents( $tmp, $out );
        passthru( 'diff -u ' . escapeshellarg( $file ) . ' ' . escapeshellarg( $tmp ) );
        unlink( $tmp );
        fwrite( STDERR, "php-ext/stubs/writerlock.stubs.php differs from the extension; regenerate it with:\n"
                      . "  php -d extension=<built libwriterlock_php.so> php-ext/stubs/generate.php\n" );
        exit( 1 );
    }
    echo "php-ext/stubs/writerlock.stubs.php matches the extension\n";
    exit( 0 );
}
file_put_contents( $file, $out );
echo "wrote $file\n";
