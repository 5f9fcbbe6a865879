<?php
/**
 * Stand-in for eZSQLite3DB: connects in the constructor (a name without a
 * path lives in var/storage/sqlite3), switches the database to WAL through
 * query(), and starts transactions with a plain BEGIN, as the driver the
 * queued one extends does.
 */
class eZSQLite3DB extends eZDBInterface
{
    function __construct( $parameters )
    {
        parent::__construct( $parameters );
        if ( $this->DBConnection === false && $this->DB !== null )
        {
            $this->DBConnection = $this->connect( $this->DB );
        }
        $this->query( 'PRAGMA journal_mode = wal;' );
    }

    private function connect( $fileName )
    {
        if ( $fileName === ':memory:' || ( strlen( $fileName ) > 0 && $fileName[0] === '/' ) )
            $fullPath = $fileName;
        else
            $fullPath = 'var/storage/sqlite3/' . $fileName;
        try
        {
            $connection = new SQLite3( $fullPath );
        }
        catch ( Exception $e )
        {
            $this->ErrorNumber = -1;
            $this->ErrorMessage = $e->getMessage();
            eZDebug::writeError( "Connection error: Couldn't connect to database. " . $this->ErrorMessage, "eZSQLite3DB" );
            $this->IsConnected = false;
            return false;
        }
        $this->IsConnected = true;
        return $connection;
    }

    function databaseName()
    {
        return 'sqlite';
    }

    function query( $sql, $server = false )
    {
        if ( $this->IsConnected )
        {
            $result = @$this->DBConnection->exec( $sql );
            if ( !$result )
            {
                $this->setError();
                eZDebug::writeError( "Error: error when executing query: $sql (" . $this->ErrorMessage . ")", "eZSQLite3DB" );
                $this->reportError();
            }
            else
            {
                return true;
            }
        }
        else
        {
            eZDebug::writeError( "Trying to do a query without being connected to a database!", "eZSQLite3DB" );
        }
        return false;
    }

    function arrayQuery( $sql, $params = array(), $server = false )
    {
        $retArray = array();
        if ( $this->IsConnected )
        {
            $results = @$this->DBConnection->query( $sql );
            if ( $results === false )
            {
                $this->setError();
                eZDebug::writeError( "Error: error when executing query: $sql (" . $this->ErrorMessage . ")", "eZSQLite3DB" );
                $this->reportError();
                return false;
            }
            while ( $row = $results->fetchArray( SQLITE3_ASSOC ) )
            {
                $retArray[] = $row;
            }
            $results->finalize();
        }
        return $retArray;
    }

    function beginQuery()
    {
        return $this->query( "BEGIN" );
    }

    function commitQuery()
    {
        return $this->query( "COMMIT" );
    }

    function rollbackQuery()
    {
        return $this->query( "ROLLBACK" );
    }

    function escapeString( $str )
    {
        return SQLite3::escapeString( (string)$str );
    }

    function close()
    {
        if ( $this->IsConnected )
        {
            $this->DBConnection->close();
            $this->IsConnected = false;
        }
    }

    function __destruct()
    {
        $this->close();
    }

    function setError()
    {
        if ( $this->DBConnection )
        {
            $this->ErrorNumber = $this->DBConnection->lastErrorCode();
            $this->ErrorMessage = $this->DBConnection->lastErrorMsg();
        }
    }
}
